"""The outbox: every message that leaves remindkit for a remote service
(Telegram, a webhook receiver) is a row here before it is sent.

``key`` is the idempotency key (unique: one reply is one row, whichever
process writes it); ``route_key`` orders the rows of one destination; a
sender claims a row with ``owner`` and ``lease_until`` so two processes never
send it at once.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "outbox",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("channel", sa.Text, nullable=False),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("route_key", sa.Text, nullable=False),
        sa.Column("route", sa.Text, nullable=False, server_default="{}"),
        sa.Column("session_id", sa.Text, nullable=True),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False, server_default="queued"),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_attempt_at", sa.BigInteger, nullable=False),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("owner", sa.Text, nullable=True),
        sa.Column("lease_until", sa.BigInteger, nullable=True),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("sent_at", sa.BigInteger, nullable=True),
        sa.Column("remote_id", sa.Text, nullable=True),
        sa.UniqueConstraint("key", name="uq_outbox_key"),
    )
    op.create_index("ix_outbox_due", "outbox", ["channel", "state", "next_attempt_at"])
    op.create_index("ix_outbox_route", "outbox", ["route_key", "state", "id"])


def downgrade() -> None:
    op.drop_index("ix_outbox_route", "outbox")
    op.drop_index("ix_outbox_due", "outbox")
    op.drop_table("outbox")
