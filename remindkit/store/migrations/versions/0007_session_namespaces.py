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
    rows, taken = _sessions(conn)
    for old, project in rows:
        new = f"@{project}/{old}"
        if not old.startswith(f"@{project}/") and new not in taken:
            _rename(conn, old, new, project)


def downgrade() -> None:
    conn = op.get_bind()
    rows, taken = _sessions(conn)
    for new, project in rows:
        prefix = f"@{project}/"
        if new.startswith(prefix) and new[len(prefix) :] not in taken:
            _rename(conn, new, new[len(prefix) :], project)


def _sessions(conn: sa.Connection) -> tuple[list[tuple[str, str]], set[str]]:
    """(id, project) of the sessions outside ``default``, and every session id."""
    rows = conn.execute(sa.text("SELECT id, project FROM sessions WHERE project <> 'default'"))
    taken = {r[0] for r in conn.execute(sa.text("SELECT id FROM sessions"))}
    return [(r[0], r[1]) for r in rows], taken


def _rename(conn: sa.Connection, old: str, new: str, project: str) -> None:
    """Session ``old`` is ``new`` from now on, in every table that names it."""
    move = {"old": old, "new": new, "project": project}
    for table, column in _COLUMNS:
        conn.execute(sa.text(f"UPDATE {table} SET {column} = :new WHERE {column} = :old"), move)
    conn.execute(
        sa.text("UPDATE outbox SET route_key = :new WHERE route_key = :old"),
        {"new": f"webhook:{new}", "old": f"webhook:{old}"},
    )
    conn.execute(
        sa.text("UPDATE api_tokens SET session = :new WHERE session = :old AND project = :project"),
        move,
    )
    conn.execute(sa.text("UPDATE sessions SET id = :new WHERE id = :old"), move)
