"""Quarantine as a column: ``reminders.quarantine`` says why an engine set a reminder
aside (``unreadable_row``: its row could not be read; ``refused_plan``: its plan was
past the engine's own bounds), where a ``quarantined: …`` prefix of ``last_error``
used to be matched. ``last_error`` keeps the reason as it was.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("reminders") as batch:
        batch.add_column(sa.Column("quarantine", sa.Text, nullable=True))
    # Reminders set aside by earlier versions carried the marker in their last error.
    op.execute(
        "UPDATE reminders SET quarantine = 'refused_plan'"
        " WHERE state = 'failed' AND last_error LIKE 'quarantined: refused plan%'"
    )
    op.execute(
        "UPDATE reminders SET quarantine = 'unreadable_row'"
        " WHERE state = 'failed' AND last_error LIKE 'quarantined:%' AND quarantine IS NULL"
    )


def downgrade() -> None:
    # last_error still says "quarantined: …", which is what earlier versions read
    with op.batch_alter_table("reminders") as batch:
        batch.drop_column("quarantine")
