"""Each project is a namespace of session ids: a session of a project other than
``default`` is stored as ``@<project>/<id>`` (``remindkit.checks.session_key``).

Sessions made in such a project before (by the HTTP API, under a bare id that a
surface of ``default`` could later take for its own: ``cursor``, ``tg:111``) move
to their namespaced id, in every table that names them; a bare id is free again
for the surface it belongs to. A session whose namespaced id is taken already
keeps its id. No table changes shape.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# (table, column) that hold a session id; the sessions table's own last
_COLUMNS = (
    ("reminders", "session_id"),
    ("occurrences", "session_id"),
    ("messages", "session_id"),
    ("message_keys", "session_id"),
    ("events", "session_id"),
    ("outbox", "session_id"),
    ("sessions", "parent_id"),
)


def upgrade() -> None:
    conn = op.get_bind()
    rows = conn.execute(
        sa.text("SELECT id, project FROM sessions WHERE project <> 'default'")
    ).all()
    taken = {r[0] for r in conn.execute(sa.text("SELECT id FROM sessions")).all()}
    moves = []
    for old, project in rows:
        new = f"@{project}/{old}"
        if old.startswith(f"@{project}/") or new in taken:
            continue
        moves.append({"old": old, "new": new, "project": project})
    for move in moves:
        for table, column in _COLUMNS:
            conn.execute(sa.text(f"UPDATE {table} SET {column} = :new WHERE {column} = :old"), move)
        conn.execute(
            sa.text("UPDATE outbox SET route_key = :new_route WHERE route_key = :old_route"),
            {"new_route": f"webhook:{move['new']}", "old_route": f"webhook:{move['old']}"},
        )
        conn.execute(
            sa.text(
                "UPDATE api_tokens SET session = :new WHERE session = :old AND project = :project"
            ),
            move,
        )
        conn.execute(sa.text("UPDATE sessions SET id = :new WHERE id = :old"), move)


def downgrade() -> None:
    conn = op.get_bind()
    rows = conn.execute(
        sa.text("SELECT id, project FROM sessions WHERE project <> 'default'")
    ).all()
    taken = {r[0] for r in conn.execute(sa.text("SELECT id FROM sessions")).all()}
    for new, project in rows:
        prefix = f"@{project}/"
        if not new.startswith(prefix) or new[len(prefix) :] in taken:
            continue
        move = {"old": new[len(prefix) :], "new": new, "project": project}
        for table, column in _COLUMNS:
            conn.execute(sa.text(f"UPDATE {table} SET {column} = :old WHERE {column} = :new"), move)
        conn.execute(
            sa.text("UPDATE outbox SET route_key = :old_route WHERE route_key = :new_route"),
            {"new_route": f"webhook:{move['new']}", "old_route": f"webhook:{move['old']}"},
        )
        conn.execute(
            sa.text(
                "UPDATE api_tokens SET session = :old WHERE session = :new AND project = :project"
            ),
            move,
        )
        conn.execute(sa.text("UPDATE sessions SET id = :old WHERE id = :new"), move)
