"""Projects and API tokens, mixed into SqlStore.

A project is a namespace of sessions (``default`` unless named) with a feature
flag ``reminders``: while it is off, the engine claims none of the project's
reminders (``claims.py`` leaves them out), so they keep their due time and fire
once, by their misfire policy, when the flag is turned on again.

A token row holds the SHA-256 of the bearer token, never the token itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, func, insert, select, update

from ..errors import InvalidInput, NotFound
from ..models import LIVE_STATES, SESSION_DELETED, Session
from . import schema as t
from .role import Role
from .rows import session_from_row

DEFAULT_PROJECT = "default"
FEATURES = ("reminders",)
_PROJECT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", re.ASCII)


def check_project(name: object) -> str:
    if not isinstance(name, str) or not _PROJECT_NAME.fullmatch(name):
        raise InvalidInput(
            f"{name!r} is not a project name (1-64 of A-Z a-z 0-9 _ . -, starting with a letter or digit)",
            code="invalid_project",
        )
    return name


def project_not_found(name: str) -> NotFound:
    return NotFound(
        f"No project by the name of {name!r} was found", code="project_not_found", project=name
    )


_R, _S = t.reminders.c, t.sessions.c
LIVE_IN_PROJECT = (
    select(func.count())
    .select_from(t.reminders.join(t.sessions, _S.id == _R.session_id))
    .where(_S.project == bindparam("p"), _R.state.in_(LIVE_STATES))
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
        """What a request needs to be let in, read in one transaction: the token of
        ``digest`` (or, with none, how many tokens there are), the project, and the
        session if it belongs to the project."""
        with self.read() as conn:
            if digest is None:
                token, tokens = None, int(conn.execute(_COUNT_TOKENS).scalar_one())
            else:
                row = conn.execute(_TOKEN_BY_HASH, {"h": digest}).first()
                token, tokens = (None if row is None else _token(row)), None
            row = conn.execute(_PROJECT, {"p": project}).first()
            proj = None if row is None else _project(row)
            sess = None
            if session_id is not None:
                got = conn.execute(_SESSION_IN_PROJECT, {"s": session_id, "p": project}).first()
                sess = None if got is None else session_from_row(got, now_us)
        return Access(token, tokens, proj, sess)


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
    m = row._mapping
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
