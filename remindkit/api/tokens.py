"""Bearer tokens: made once, printed once, stored as their SHA-256.

A token is *admin* (every project), *project* (one project's sessions) or
*session* (one session), and may be read-only (GET only).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..checks import session_key
from ..errors import Forbidden, InvalidInput, Unauthorized
from ..reminders import check_session_id
from ..store.projects import check_project, project_not_found

if TYPE_CHECKING:
    from ..models import Session
    from ..store.roles import ProjectStore

PREFIX = "rk_"


@dataclass(frozen=True)
class Principal:
    """Who a request acts as."""

    scope: str  # admin | project | session
    project: str | None = None
    session: str | None = None
    read_only: bool = False
    token_id: str | None = None

    def may_use(self, project: str, session: str | None = None) -> None:
        """Raise ``forbidden`` unless this principal may act on ``project`` (and ``session``,
        by its name in the project or its id in the store: :func:`~remindkit.checks.session_key`)."""
        if self.scope == "admin":
            return
        if session is not None:
            session = session_key(project, session)
        if self.project != project:
            raise Forbidden(
                f"this token is for project {self.project!r}, not {project!r}", code="forbidden"
            )
        if self.scope == "session" and self.session != session:
            what = f"session {session!r}" if session is not None else "the whole project"
            raise Forbidden(
                f"this token is for session {self.session!r}, not {what}", code="forbidden"
            )

    def may_write(self) -> None:
        if self.read_only:
            raise Forbidden("this token is read-only", code="read_only")


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(
    projects: ProjectStore,
    *,
    project: str | None,
    session: str | None,
    read_only: bool,
    now_us: int,
) -> tuple[str, str]:
    """Store a new token's hash; return (token id, the token). ``project`` None: admin."""
    if project is not None:
        project = check_project(project)
        if projects.get_project(project) is None:
            projects.create_project(project, now_us=now_us)
    if session is not None:
        if project is None:
            raise InvalidInput("a session token needs --project", code="invalid_argument")
        checked = check_session_id(session)
        assert checked is not None
        session = session_key(project, checked)  # the session in the project's namespace
    token = PREFIX + secrets.token_urlsafe(32)
    token_id = "tok_" + secrets.token_hex(4)
    projects.add_token(
        token_id=token_id,
        digest=digest(token),
        project=project,
        session=session,
        read_only=read_only,
        now_us=now_us,
    )
    return token_id, token


def authenticate(projects: ProjectStore, token: str | None) -> Principal:
    """The principal of a stored bearer token, else ``unauthorized``. There is no
    answer without a credential: the user's own clients bring the local one
    (:mod:`remindkit.credential`), which the HTTP API checks before this."""
    if not token or len(token) > 200:
        raise Unauthorized("that token is not known", code="unauthorized")
    return _principal(projects.token_by_hash(digest(token)))


def require_project(projects: ProjectStore, project: str) -> dict:
    check_project(project)
    return _feature_on(project, projects.get_project(project))


def _feature_on(project: str, got: dict | None) -> dict:
    if got is None:
        raise project_not_found(project)
    if not got["features"]["reminders"]:
        raise Forbidden(
            f"the reminders feature is off for project {project!r}",
            code="feature_disabled",
            project=project,
        )
    return got


def admit(
    projects: ProjectStore,
    who: Principal,
    project: str,
    session: str | None = None,
    *,
    write: bool = False,
    now_us: int | None = None,
) -> Session | None:
    """:meth:`Principal.may_use` (and ``may_write``) and :func:`require_project` for
    one request of ``who``, from one read of the store; the session when it belongs
    to the project (else None)."""
    check_project(project)
    who.may_use(project, session)
    if write:
        who.may_write()
    got = projects.access(None, project, session, now_us=now_us)
    _feature_on(project, got.project)
    return got.session


def _principal(row: dict | None) -> Principal:
    if row is None:
        raise Unauthorized("that token is not known", code="unauthorized")
    return Principal(row["scope"], row["project"], row["session"], row["read_only"], row["id"])


class AgentTokens:
    """``REMINDKIT_TOKEN`` for the agent commands an engine runs: one session token
    per session, made on first use and kept in this process only (the store has its
    hash); :meth:`revoke_all` removes them when the process ends."""

    def __init__(self, projects: ProjectStore) -> None:
        self.projects = projects
        self._made: dict[str, tuple[str, str]] = {}

    def env(self, session: str, *, now_us: int) -> dict[str, str]:
        """The environment entries to add for a command run for ``session``."""
        if session not in self._made:
            project = self.projects.project_of(session) or "default"
            self._made[session] = create_token(
                self.projects, project=project, session=session, read_only=False, now_us=now_us
            )
        return {"REMINDKIT_TOKEN": self._made[session][1]}

    def revoke_all(self) -> None:
        for token_id, _token in self._made.values():
            self.projects.remove_token(token_id)
        self._made.clear()
