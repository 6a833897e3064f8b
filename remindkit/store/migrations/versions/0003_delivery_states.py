"""Delivery states as columns: what a waiting occurrence waits for, when it was
handed to its session, and each session's fallback policy and failure streak.

* ``occurrences.wait_for``: idle | rebase | session | retry (NULL unless waiting);
  a re-based fire used to be recognised by a prefix of its error text.
* ``occurrences.handed_at``: when the turn that carries it started, so history
  shows due -> fired (alert), fired -> handed, handed -> answered.
* ``sessions.fallback``: ``fresh`` (re-send once into a fresh session) or ``none``.
* ``sessions.failures`` / ``sessions.last_error``: consecutive failed turns and
  the last reason; a session that keeps failing is tried after its fallback.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("occurrences") as batch:
        batch.add_column(sa.Column("wait_for", sa.Text, nullable=True))
        batch.add_column(sa.Column("handed_at", sa.BigInteger, nullable=True))
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("fallback", sa.Text, nullable=False, server_default="fresh"))
        batch.add_column(sa.Column("failures", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(sa.Column("last_error", sa.Text, nullable=True))
    # Re-based fires written by earlier versions carried the marker in their error.
    op.execute(
        "UPDATE occurrences SET wait_for = 'rebase' WHERE state = 'waiting' AND error LIKE 'rebase: %'"
    )
    op.execute(
        "UPDATE occurrences SET wait_for = 'idle' WHERE state = 'waiting' AND wait_for IS NULL"
    )


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("last_error")
        batch.drop_column("failures")
        batch.drop_column("fallback")
    with op.batch_alter_table("occurrences") as batch:
        batch.drop_column("handed_at")
        batch.drop_column("wait_for")
