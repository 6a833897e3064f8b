"""Initial schema: reminders, occurrences, sessions, flags, engines, leases.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

LIVE = "state IN ('active','paused') AND label IS NOT NULL"


def upgrade() -> None:
    op.create_table(
        "reminders",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("session_id", sa.Text, nullable=True),
        sa.Column("label", sa.Text, nullable=True),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("tz", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("next_fire_at", sa.BigInteger, nullable=True),
        sa.Column("fired_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("alarm", sa.Boolean, nullable=False, server_default=sa.text("false")),
        sa.Column("announce", sa.Text, nullable=True),
        sa.Column("urgency", sa.Text, nullable=False, server_default="normal"),
        sa.Column("misfire", sa.Text, nullable=False, server_default="latest"),
        sa.Column("catchup_cap", sa.Integer, nullable=False, server_default="10"),
        sa.Column("on_busy", sa.Text, nullable=False, server_default="wait"),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("source", sa.Text, nullable=False, server_default="api"),
        sa.Column("slot", sa.Integer, nullable=True),
        sa.Column("snoozed", sa.Boolean, nullable=False, server_default=sa.text("false")),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.Column("version", sa.Integer, nullable=False, server_default="1"),
    )
    op.create_index("ix_reminders_due", "reminders", ["state", "next_fire_at"])
    op.create_index("ix_reminders_session", "reminders", ["session_id", "state"])
    op.create_index(
        "ux_reminders_live_label",
        "reminders",
        ["session_id", "label"],
        unique=True,
        sqlite_where=sa.text(LIVE),
        postgresql_where=sa.text(LIVE),
    )
    op.create_table(
        "occurrences",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("reminder_id", sa.Text, nullable=False),
        sa.Column("due_at", sa.BigInteger, nullable=False),
        sa.Column("session_id", sa.Text, nullable=True),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("owner", sa.Text, nullable=True),
        sa.Column("token", sa.Text, nullable=True),
        sa.Column("lease_until", sa.BigInteger, nullable=True),
        sa.Column("fired_at", sa.BigInteger, nullable=True),
        sa.Column("delivered_at", sa.BigInteger, nullable=True),
        sa.Column("missed", sa.Integer, nullable=False, server_default="0"),
        sa.Column("position", sa.Integer, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("delivered_to", sa.Text, nullable=True),
        sa.Column("alert", sa.Text, nullable=True),
        sa.UniqueConstraint("reminder_id", "due_at", name="uq_occurrence_key"),
    )
    op.create_index("ix_occurrences_state", "occurrences", ["state", "lease_until"])
    op.create_index("ix_occurrences_session", "occurrences", ["session_id", "state"])
    op.create_index("ix_occurrences_fired", "occurrences", ["fired_at"])
    op.create_table(
        "sessions",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("adapter", sa.Text, nullable=True),
        sa.Column("config", sa.Text, nullable=False, server_default="{}"),
        sa.Column("state", sa.Text, nullable=False, server_default="active"),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("last_active_at", sa.BigInteger, nullable=False),
        sa.Column("busy_since", sa.BigInteger, nullable=True),
        sa.Column("turn_owner", sa.Text, nullable=True),
        sa.Column("turn_token", sa.Text, nullable=True),
        sa.Column("turn_until", sa.BigInteger, nullable=True),
        sa.Column("parent_id", sa.Text, nullable=True),
        sa.Column("title", sa.Text, nullable=True),
    )
    op.create_table(
        "flags",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "engines",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("role", sa.Text, nullable=False, server_default="engine"),
        sa.Column("alert_priority", sa.Integer, nullable=False, server_default="0"),
        sa.Column("started_at", sa.BigInteger, nullable=False),
        sa.Column("heartbeat_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "leases",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("holder", sa.Text, nullable=False),
        sa.Column("priority", sa.Integer, nullable=False, server_default="0"),
        sa.Column("until", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    for table in ("leases", "engines", "flags", "sessions", "occurrences", "reminders"):
        op.drop_table(table)
