"""The audit trail: one event per change to a reminder (created, paused,
cancelled, ...) and per outcome an engine records (fired, delivered, ...).

The id only grows (AUTOINCREMENT on SQLite: never reused); readers tail the
table by id.

Revision ID: 0004
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.BigInteger, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("surface", sa.Text, nullable=False),
        sa.Column("session_id", sa.Text, nullable=True),
        sa.Column("reminder_id", sa.Text, nullable=True),
        sa.Column("occurrence_id", sa.Integer, nullable=True),
        sa.Column("detail", sa.Text, nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_events_reminder", "events", ["reminder_id", "id"])
    op.create_index("ix_events_session", "events", ["session_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_events_session", table_name="events")
    op.drop_index("ix_events_reminder", table_name="events")
    op.drop_table("events")
