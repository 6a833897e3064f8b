"""Projects and API tokens, mixed into SqlStore.

A project is a namespace of sessions (``default`` unless named) with a feature
flag ``reminders``: while it is off, the engine claims none of the project's
reminders (``claims.py`` leaves them out), so they keep their due time and fire
once, by their misfire policy, when the flag is turned on again.

A token row holds the SHA-256 of the bearer token, never the token itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, func, insert, select, update

from ..checks import DEFAULT_PROJECT, check_project  # noqa: F401 - re-exported
from ..errors import InvalidInput, NotFound
from ..models import SESSION_DELETED, Session
from . import schema as t
from .role import Role
from .rows import SESSION_FIELDS, session_from_row, session_of_values

FEATURES = ("reminders",)


def project_not_found(name: str) -> NotFound:
    return NotFound(
        f"No project by the name of {name!r} was found", code="project_not_found", project=name
    )


_R, _S = t.reminders.c, t.sessions.c
LIVE_IN_PROJECT = (
    select(func.count())
    .select_from(t.reminders.join(t.sessions, _S.id == _R.session_id))
    .where(_S.project == bindparam("p"), _R.state == "active")  # active ones, as the limits count
)
PROJECT_OF_SESSION = select(_S.project).where(_S.id == bindparam("sid"))


def disabled_projects_sessions() -> Any:
    """The ids of sessions whose project has the ``reminders`` feature off (a subquery)."""
    s, p = t.sessions.c, t.projects.c
    return select(s.id).join(t.projects, p.name == s.project).where(p.reminders.is_(False))


class Projects(Role):
    """Projects, their sessions, and API tokens."""

    # -- projects ------------------------------------------------------------------------

    def create_project(self, name: str, *, now_us: int) -> dict[str, Any]:
        """Create the project if it does not exist (features on); return it."""
        name = check_project(name)
        with self.write() as conn:
            if (
                conn.execute(select(t.projects.c.name).where(t.projects.c.name == name)).first()
                is None
            ):
                conn.execute(
                    insert(t.projects).values(
                        name=name, reminders=True, created_at=now_us, updated_at=now_us
                    )
                )
        got = self.get_project(name)
        assert got is not None
        return got

    def get_project(self, name: str) -> dict[str, Any] | None:
        with self.read() as conn:
            row = conn.execute(_PROJECT, {"p": name}).first()
        return None if row is None else _project(row)

    def list_projects(self) -> list[dict[str, Any]]:
        with self.read() as conn:
            return [
                _project(r) for r in conn.execute(select(t.projects).order_by(t.projects.c.name))
            ]

    def set_feature(self, name: str, feature: str, on: bool, *, now_us: int) -> dict[str, Any]:
        """Turn a project's feature on or off (engines are woken: a project turned on
        fires what it missed)."""
        if feature not in FEATURES:
            raise InvalidInput(
                f"feature must be one of {', '.join(FEATURES)} (got {feature!r})",
                code="invalid_argument",
            )
        name = check_project(name)
        with self.write() as conn:
            done = conn.execute(
                update(t.projects)
                .where(t.projects.c.name == name)
                .values(reminders=bool(on), updated_at=now_us)
            )
            if done.rowcount == 0:
                raise project_not_found(name)
        got = self.get_project(name)
        assert got is not None
        return got

    # -- sessions of a project -----------------------------------------------------------

    def session_in_project(
        self, project: str, session_id: str, *, now_us: int | None = None
    ) -> Session | None:
        """The session if it belongs to ``project``, else None."""
        with self.read() as conn:
            row = conn.execute(_SESSION_IN_PROJECT, {"s": session_id, "p": project}).first()
        return None if row is None else session_from_row(row, now_us)

    def project_sessions(
        self, project: str, *, include_deleted: bool = False, now_us: int | None = None
    ) -> list[Session]:
        s = t.sessions.c
        stmt = (
            select(t.sessions).where(s.project == project).order_by(s.last_active_at.desc(), s.id)
        )
        if not include_deleted:
            stmt = stmt.where(s.state != SESSION_DELETED)
        with self.read() as conn:
            return [session_from_row(r, now_us) for r in conn.execute(stmt)]

    def project_of(self, session_id: str) -> str | None:
        with self.read() as conn:
            return conn.execute(
                select(t.sessions.c.project).where(t.sessions.c.id == session_id)
            ).scalar()

    def count_live_in_project(self, project: str) -> int:
        with self.read() as conn:
            return int(conn.execute(LIVE_IN_PROJECT, {"p": project}).scalar_one())

    # -- tokens --------------------------------------------------------------------------

    def add_token(
        self,
        *,
        token_id: str,
        digest: str,
        project: str | None,
        session: str | None,
        read_only: bool,
        now_us: int,
    ) -> None:
        with self.write(notify=False) as conn:
            conn.execute(
                insert(t.api_tokens).values(
                    id=token_id,
                    hash=digest,
                    project=project,
                    session=session,
                    read_only=bool(read_only),
                    created_at=now_us,
                    last_used_at=None,
                )
            )

    def token_by_hash(self, digest: str) -> dict[str, Any] | None:
        with self.read() as conn:
            row = conn.execute(_TOKEN_BY_HASH, {"h": digest}).first()
        return None if row is None else _token(row)

    def list_tokens(self) -> list[dict[str, Any]]:
        c = t.api_tokens.c
        with self.read() as conn:
            return [
                _token(r) for r in conn.execute(select(t.api_tokens).order_by(c.created_at, c.id))
            ]

    def remove_token(self, token_id: str) -> bool:
        with self.write(notify=False) as conn:
            return (
                conn.execute(t.api_tokens.delete().where(t.api_tokens.c.id == token_id)).rowcount
                == 1
            )

    def count_tokens(self) -> int:
        with self.read() as conn:
            return int(conn.execute(_COUNT_TOKENS).scalar_one())

    def access(
        self,
        digest: str | None,
        project: str,
        session_id: str | None = None,
        *,
        now_us: int | None = None,
    ) -> Access:
        """What a request needs to be let in, read in one statement: the token of
        ``digest`` (or, with none, how many tokens there are), the project, and the
        session if it belongs to the project. Each is a lookup by a unique key (at most
        one row), joined to a single row, so one statement through the driver answers
        all three from one snapshot (:meth:`Db.query`)."""
        sql, params = _access_sql(self.dialect.placeholder, digest, project, session_id)
        (row,) = self.db.query(sql, params)
        if digest is None:
            token, tokens = None, int(row[0])
        else:
            token = None if row[0] is None else _token_of_values(row[:_TOKEN_WIDTH])
            tokens = None
        at = _TOKEN_WIDTH
        proj = None
        if row[at] is not None:
            proj = {"name": row[at], "features": {"reminders": bool(row[at + 1])}}
        at += 2
        sess = None
        if session_id is not None and row[at] is not None:
            sess = session_of_values(row[at:], now_us)
        return Access(token, tokens, proj, sess)


_TOKEN_FIELDS = ("id", "project", "session", "read_only", "created_at", "last_used_at")
_TOKEN_WIDTH = len(_TOKEN_FIELDS)
_ACCESS_SQL: dict[tuple[str, bool, bool], str] = {}


def _access_sql(
    mark: str, digest: str | None, project: str, session_id: str | None
) -> tuple[str, tuple[Any, ...]]:
    """:meth:`Projects.access`'s statement (built once for each shape) and its
    parameters. Its columns: the token's (or the number of tokens, and NULLs), the
    project's name and flag, then the session's in ``sessions`` column order."""
    key = (mark, digest is None, session_id is None)
    sql = _ACCESS_SQL.get(key)
    if sql is None:
        if digest is None:
            token_cols = "(SELECT COUNT(*) FROM api_tokens)" + ", NULL" * (_TOKEN_WIDTH - 1)
            token_join = ""
        else:
            token_cols = ", ".join(f"tk.{c}" for c in _TOKEN_FIELDS)
            token_join = f" LEFT JOIN api_tokens tk ON tk.hash = {mark}"
        session_cols = ", ".join(f"s.{c}" for c in SESSION_FIELDS)
        session_join = (
            ""
            if session_id is None
            else f" LEFT JOIN sessions s ON s.id = {mark} AND s.project = {mark}"
        )
        if session_id is None:
            session_cols = "NULL"
        sql = _ACCESS_SQL[key] = (
            f"SELECT {token_cols}, p.name, p.reminders, {session_cols}"
            f" FROM (SELECT 1 AS one) one{token_join}"
            f" LEFT JOIN projects p ON p.name = {mark}{session_join}"
        )
    params: tuple[Any, ...] = () if digest is None else (digest,)
    params += (project,)
    if session_id is not None:
        params += (session_id, project)
    return sql, params


def _token_of_values(values: Any) -> dict[str, Any]:
    return _token_of_mapping(dict(zip(_TOKEN_FIELDS, values, strict=True)))


# Built once: a request's checks run these on every call (access and the single lookups).
_COUNT_TOKENS = select(func.count()).select_from(t.api_tokens)
_TOKEN_BY_HASH = select(t.api_tokens).where(t.api_tokens.c.hash == bindparam("h"))
_PROJECT = select(t.projects).where(t.projects.c.name == bindparam("p"))
_SESSION_IN_PROJECT = select(t.sessions).where(
    t.sessions.c.id == bindparam("s"), t.sessions.c.project == bindparam("p")
)


@dataclass(frozen=True)
class Access:
    """See :meth:`Projects.access`."""

    token: dict[str, Any] | None
    tokens: int | None  # asked without a token: how many the store holds
    project: dict[str, Any] | None
    session: Session | None


def _project(row: Any) -> dict[str, Any]:
    m = row._mapping
    return {"name": m["name"], "features": {"reminders": bool(m["reminders"])}}


def _token(row: Any) -> dict[str, Any]:
    return _token_of_mapping(row._mapping)


def _token_of_mapping(m: Any) -> dict[str, Any]:
    scope = (
        "admin" if m["project"] is None else ("session" if m["session"] is not None else "project")
    )
    return {
        "id": m["id"],
        "scope": scope,
        "project": m["project"],
        "session": m["session"],
        "read_only": bool(m["read_only"]),
        "created_at": m["created_at"],
        "last_used_at": m["last_used_at"],
    }
