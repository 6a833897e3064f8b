"""Projects (namespaces of sessions, each with its ``reminders`` feature flag) and
the bearer tokens of the HTTP API.

Every existing session belongs to the ``default`` project. A token row keeps only
the SHA-256 of the token; ``project`` NULL is an admin token, ``session`` NULL a
project token.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    projects = op.create_table(
        "projects",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("reminders", sa.Boolean, nullable=False, server_default=sa.text("true")),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(
        projects, [{"name": "default", "reminders": True, "created_at": 0, "updated_at": 0}]
    )
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("project", sa.Text, nullable=False, server_default="default"))
    op.create_index("ix_sessions_project", "sessions", ["project", "state"])
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("hash", sa.Text, nullable=False, unique=True),
        sa.Column("project", sa.Text, nullable=True),
        sa.Column("session", sa.Text, nullable=True),
        sa.Column("read_only", sa.Boolean, nullable=False, server_default=sa.text("false")),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("last_used_at", sa.BigInteger, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("api_tokens")
    op.drop_index("ix_sessions_project", table_name="sessions")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("project")
    op.drop_table("projects")
