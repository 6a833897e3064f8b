"""Transcripts: the messages of sessions whose conversation remindkit keeps
(openai sessions, the chat and the demo) and the occurrence keys each delivery
took.

One delivery message can carry several occurrences, so the keys live in a table
of their own whose primary key is (session_id, occurrence_key): the same
occurrence key is never taken twice in a session, whichever engine or process
runs the turn.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "messages",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("session_id", sa.Text, nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("role", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False, server_default="chat"),
        sa.Column("content", sa.Text, nullable=True),
        sa.Column("hidden", sa.Boolean, nullable=False, server_default=sa.text("false")),
        sa.Column("tool_calls", sa.Text, nullable=True),
        sa.Column("tool_call_id", sa.Text, nullable=True),
        sa.Column("name", sa.Text, nullable=True),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("session_id", "seq", name="uq_message_seq"),
    )
    op.create_table(
        "message_keys",
        sa.Column("session_id", sa.Text, primary_key=True),
        sa.Column("occurrence_key", sa.Text, primary_key=True),
        sa.Column("message_id", sa.Integer, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("message_keys")
    op.drop_table("messages")
