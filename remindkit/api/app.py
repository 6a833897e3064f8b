"""The FastAPI application: routes over :class:`~remindkit.reminders.Reminders`.

The credential check and the reminder routes run on the event loop: their store
calls are short, and a hop to the thread pool and back costs more than they do on
a busy machine (``bench/api_speed.py``). Every refusal is ``{"error": {"code", "message"}}`` with the codes of the
reminders API; the status says its family (400 bad input, 401 no credential,
403 outside the credential's scope or the feature off, 404 unknown, 409 limits
and conflicts, 503 store unavailable).
"""

import builtins
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..checks import check_session_id, session_key, session_name
from ..clock import to_us
from ..errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    LimitExceeded,
    NotFound,
    RemindkitError,
    StoreError,
    Unauthorized,
)
from ..models import Reminder, Session
from ..reminders import Reminders
from ..store.projects import check_project
from . import tokens as tk

STATUS = {
    InvalidInput: 400,
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    LimitExceeded: 409,
    StoreError: 503,
}
STATIC = Path(__file__).with_name("static")
NOTEBOOK_STATIC = Path(__file__).parent.parent / "notebook" / "static"
ASSETS = Path(__file__).parent.parent / "assets"


def status_of(exc: RemindkitError) -> int:
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 400  # InvalidSchedule and any other refusal of input


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


class ReminderIn(BaseModel):
    """A new reminder: ``prompt``, and one of ``in``, ``at``, ``every`` (with ``in``
    or ``at`` for its first fire) or ``cron`` (with ``timezone``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    prompt: str = Field(
        description="what to remind about; handed back to the session when it fires"
    )
    name: str | None = Field(
        None, description="label; a new reminder with a live name replaces the old one"
    )
    in_: str | int | None = Field(None, alias="in", description="30s, 5m, 2h, 1h30m or seconds")
    at: str | None = Field(
        None, description="RFC 3339 with offset, or a local date-time with timezone"
    )
    every: str | int | None = None
    cron: str | None = Field(None, description="5 fields, or 6 with seconds first")
    timezone: str | None = Field(None, description="IANA zone")
    repeat: int | str | None = Field(None, description="number of fires, or forever / -1")
    until: str | None = None
    alarm: bool = False
    announce: str | None = None
    on_busy: str = "wait"
    urgency: str = "normal"
    misfire: str = "latest"


class ReminderPatch(BaseModel):
    """``enabled`` false pauses, true resumes; ``snooze`` a duration; ``prompt`` and
    ``name`` change the text and label; ``version`` refuses a stale change."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool | None = None
    snooze: str | int | None = None
    prompt: str | None = None
    name: str | None = None
    version: int | None = None


def reminder_out(rem: Reminder) -> dict[str, Any]:
    data = rem.to_dict()
    data["version"] = rem.version
    if rem.session is not None:  # as its project names it (checks.session_key)
        data["session"] = session_name(rem.session)
    return data


def _reminder_json(rem: Reminder) -> bytes:
    """:func:`reminder_out` encoded as JSONResponse encodes it, once per reminder (a
    frozen value; the store hands the same object back while its row is unchanged)."""
    known: bytes | None = rem.__dict__.get("_api_json")
    if known is None:
        known = rem.__dict__["_api_json"] = _ENCODE(reminder_out(rem)).encode()
    return known


def reminders_response(rems: builtins.list[Reminder]) -> Response:
    """A JSON array of reminders, put together from their encoded forms."""
    return Response(b"[" + b",".join(map(_reminder_json, rems)) + b"]", media_type=JSON_TYPE)


_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
JSON_TYPE = "application/json"


def bearer_token(authorization: str | None, access_token: str | None) -> str | None:
    """The bearer token of ``Authorization: Bearer …`` (not yet checked), else of
    ``?access_token=`` (EventSource and the web page cannot set headers), else None."""
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "bearer":
            raise Unauthorized("use Authorization: Bearer <token>", code="unauthorized")
        return value.strip()
    return access_token or None


# The Authorization header as FastAPI describes the Header() parameter of credential(),
# for the routes that read it from the request (bearer): their OpenAPI stays the same.
AUTH_HEADER: dict[str, Any] = {
    "parameters": [
        {
            "in": "header",
            "name": "authorization",
            "required": False,
            "schema": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Authorization"},
        }
    ]
}


def session_out(sess: Session, project: str) -> dict[str, Any]:
    data = sess.to_dict()
    data["id"] = session_name(sess.id)  # as its project names it (checks.session_key)
    if sess.parent_id is not None:
        data["parent_id"] = session_name(sess.parent_id)
    data["project"] = project
    return data


def mcp_over_http(api: Reminders) -> Any:
    """The MCP server's tools over Streamable HTTP for ``/mcp`` (``remindkit[mcp]``), each
    call acting for the session of its bearer token: a session token, not read-only,
    of a project whose reminders feature is on. None without the ``mcp`` extra."""
    try:
        from ..mcp.http import http_app
    except ImportError:
        return None
    store = api.store

    def verify(token: str) -> str | None:
        try:
            who = tk.authenticate(store.projects, token, open_when_none=False)
            if (
                who.scope != "session"
                or who.read_only
                or who.session is None
                or who.project is None
            ):
                return None
            tk.require_project(store.projects, who.project)
        except RemindkitError:
            return None
        return who.session

    return http_app(api, verify, path="/")


def create_app(
    api: Reminders, *, open_loopback: bool = True, engine: Any = None, feed: Any = None
) -> FastAPI:
    """The application over ``api``. ``open_loopback``: with no token in the store a
    request without one acts as admin (the server listens on loopback only)."""
    store = api.store
    mcp_app = mcp_over_http(api)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if mcp_app is None:
            yield
            return
        async with mcp_app.router.lifespan_context(mcp_app):  # the MCP session manager
            yield

    app = FastAPI(
        title="remindkit",
        version="1",
        description=__doc__,
        lifespan=lifespan,
        responses={
            400: {"description": "bad input"},
            401: {"description": "no or unknown token"},
            403: {"description": "outside the token's scope, read-only, or feature_disabled"},
            404: {"description": "unknown"},
            409: {"description": "limits, conflicts"},
        },
    )
    app.state.api = api
    app.state.engine = engine
    if mcp_app is not None:
        app.mount("/mcp", mcp_app)

    @app.exception_handler(RemindkitError)
    async def _refusal(_request: Request, exc: RemindkitError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
        return JSONResponse(
            error_body(exc.code, exc.message), status_code=status_of(exc), headers=headers
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for err in exc.errors()[:5]:
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
            parts.append(f"{where}: {err.get('msg')}")
        return JSONResponse(
            error_body("invalid_argument", "; ".join(parts) or "invalid request"), status_code=400
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(
            exc.status_code, "invalid_argument"
        )
        return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code)

    async def credential(
        authorization: Annotated[str | None, Header()] = None,
        access_token: Annotated[str | None, Query(include_in_schema=False)] = None,
    ) -> str | None:
        """The bearer token of the request (not yet checked), or None."""
        return bearer_token(authorization, access_token)

    Cred = Annotated[str | None, Depends(credential)]

    async def bearer(request: Request) -> str | None:
        """:func:`credential` read from the request itself, for the reminder routes:
        FastAPI extracting and validating credential's two parameters was a fifth of
        its work on a create. Still a dependency, so it refuses (401) before the body
        is validated, as credential does; the route's OpenAPI says so (AUTH_HEADER)."""
        return bearer_token(
            request.headers.get("authorization"), request.query_params.get("access_token")
        )

    Token = Annotated[str | None, Depends(bearer)]

    async def principal(token: Cred) -> tk.Principal:
        return tk.authenticate(store.projects, token, open_when_none=open_loopback)

    Who = Annotated[tk.Principal, Depends(principal)]

    def in_project(
        token: str | None, project: str, session: str | None, *, write: bool = False
    ) -> tuple[str | None, Session | None]:
        """Let the request in (one read of the store: token, project, session): its
        session's id in the store (the project's own namespace: checks.session_key)
        and the session, when it is one of the project's."""
        try:
            check_project(project)
            sid = None if session is None else session_key(project, str(check_session_id(session)))
        except InvalidInput:
            tk.authenticate(store.projects, token, open_when_none=open_loopback)  # 401 first
            raise
        _who, sess = tk.admit(
            store.projects,
            token,
            project,
            sid,
            open_when_none=open_loopback,
            write=write,
            now_us=now_us(),
        )
        return sid, sess

    def own(rem: Reminder, sid: str | None, sess: Session | None) -> Reminder:
        """The reminder, if it is one of this session's (in this project)."""
        if sess is None or rem.session != sid:
            raise NotFound.reminder(rem.id)
        return rem

    def now_us() -> int:
        return to_us(api.clock.now())

    base = "/v1/projects/{project}/sessions"

    # -- service ---------------------------------------------------------------------------

    @app.get("/healthz", tags=["service"])
    def healthz() -> dict[str, Any]:
        store.coordination.get_flag("paused_all")  # answers only if the store does
        return {"ok": True}

    @app.get("/v1/status", tags=["service"])
    def status(who: Who) -> dict[str, Any]:
        t = now_us()
        engines = store.coordination.live_engines(since_us=t - int(api.settings.lease_s * 2e6))
        holder = store.coordination.lease_holder("alerter", now_us=t)
        paused = api.paused_all
        return {
            "paused_all": paused,
            "armed": not paused and bool(engines),
            "engines": [
                {"id": e["id"], "role": e["role"], "pid": e["pid"], "host": e["host"]}
                for e in engines
            ],
            "alerter": holder[0] if holder else None,
            "engine": getattr(engine, "id", None),
            "streams": feed.open_streams() if feed is not None else 0,
            "scope": {
                "scope": who.scope,
                "project": who.project,
                "session": who.session,
                "read_only": who.read_only,
            },
        }

    # -- sessions --------------------------------------------------------------------------

    @app.get(base, tags=["sessions"])
    def list_sessions(project: str, token: Cred) -> builtins.list[dict[str, Any]]:
        in_project(token, project, None)
        return [
            session_out(s, project)
            for s in store.projects.project_sessions(project, now_us=now_us())
        ]

    def get_session(project: str, session: str, token: Cred) -> dict[str, Any]:
        sid, got = in_project(token, project, session)
        if got is None:
            raise NotFound(
                f"No session by the id of {sid!r} was found", code="session_not_found", session=sid
            )
        return session_out(got, project)

    @app.get(base + "/{session:path}/view", tags=["sessions"])
    def session_view(project: str, session: str, token: Cred) -> Response:
        """What the web page shows: the live reminders as pills (``due_ms``) and the
        conversation as lines, a fired turn as one marker (the notebook panel's view)."""
        from ..notebook.state import TRANSCRIPT_LINES, chat_lines, pills
        from ..schedules.zones import get_zone

        sid, sess = in_project(token, project, session)
        if sess is None or sid is None:
            return JSONResponse({"pills": [], "lines": []})
        lines = chat_lines(
            store.transcripts.messages(sid, last=TRANSCRIPT_LINES * 4), get_zone(api.default_tz)
        )
        return JSONResponse(
            {
                "pills": [p.to_json() for p in pills(api.list(session=sid))],
                "lines": [ln.to_json() for ln in lines],
            }
        )

    # -- reminders -------------------------------------------------------------------------

    @app.get(base + "/{session:path}/reminders", tags=["reminders"], openapi_extra=AUTH_HEADER)
    async def list_reminders(
        project: str,
        session: str,
        token: Token,
        all: Annotated[bool, Query(description="finished ones too")] = False,
    ) -> Response:
        sid, sess = in_project(token, project, session)
        if sess is None or sid is None:
            return JSONResponse([])
        return reminders_response(api.list(session=sid, all=all))

    @app.post(
        base + "/{session:path}/reminders",
        status_code=201,
        tags=["reminders"],
        openapi_extra=AUTH_HEADER,
    )
    async def create_reminder(
        project: str, session: str, body: ReminderIn, token: Token
    ) -> Response:
        sid, _sess = in_project(token, project, session, write=True)
        assert sid is not None
        created = api.add(
            body.prompt,
            session=sid,
            label=body.name,
            in_=body.in_,
            at=body.at,
            every=body.every,
            cron=body.cron,
            tz=body.timezone,
            repeat=body.repeat,
            until=body.until,
            alarm=body.alarm,
            announce=body.announce,
            urgency=body.urgency,
            misfire=body.misfire,
            on_busy=body.on_busy,
            source="http",
            project=project,
        )
        rem = created.reminder
        data = reminder_out(rem)
        data["replaced"] = list(created.replaced)
        return JSONResponse(
            data,
            status_code=201,
            headers={
                "Location": f"/v1/projects/{project}/sessions/{session_name(sid)}/reminders/{rem.id}"
            },
        )

    @app.get(
        base + "/{session:path}/reminders/{reminder_id}",
        tags=["reminders"],
        openapi_extra=AUTH_HEADER,
    )
    async def get_reminder(project: str, session: str, reminder_id: str, token: Token) -> Response:
        sid, sess = in_project(token, project, session)
        return JSONResponse(reminder_out(own(api.get(reminder_id), sid, sess)))

    @app.patch(
        base + "/{session:path}/reminders/{reminder_id}",
        tags=["reminders"],
        openapi_extra=AUTH_HEADER,
    )
    async def patch_reminder(
        project: str, session: str, reminder_id: str, body: ReminderPatch, token: Token
    ) -> Response:
        sid, sess = in_project(token, project, session, write=True)
        rem = own(api.get(reminder_id), sid, sess)
        if body.version is not None and body.version != rem.version:
            raise Conflict(
                f"reminder {rem.id} is at version {rem.version}, not {body.version}; read it again",
                code="conflict",
                reminder_id=rem.id,
            )
        version = body.version
        if body.prompt is not None or "name" in body.model_fields_set:
            rem = api.edit(
                rem.id,
                text=body.prompt,
                label=body.name if "name" in body.model_fields_set else Any,
                session=sid,
                version=version,
            )
            version = None
        if body.enabled is False:
            rem = api.pause([rem.id], session=sid)[0]
        elif body.enabled is True:
            rem = api.resume([rem.id], session=sid)[0]
        if body.snooze is not None:
            rem = api.snooze(rem.id, body.snooze, session=sid)
        return JSONResponse(reminder_out(rem))

    @app.delete(
        base + "/{session:path}/reminders/{reminder_id}",
        status_code=204,
        tags=["reminders"],
        openapi_extra=AUTH_HEADER,
    )
    async def delete_reminder(
        project: str, session: str, reminder_id: str, token: Token
    ) -> Response:
        sid, sess = in_project(token, project, session, write=True)
        own(api.get(reminder_id), sid, sess)
        api.cancel([reminder_id], session=sid)
        return Response(status_code=204)

    @app.get(base + "/{session:path}/reminders/{reminder_id}/history", tags=["reminders"])
    def reminder_history(
        project: str,
        session: str,
        reminder_id: str,
        token: Cred,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> builtins.list[dict[str, Any]]:
        sid, sess = in_project(token, project, session)
        own(api.get(reminder_id), sid, sess)
        out = [o.to_dict() for o in api.history(reminder_id, limit=limit)]
        for o in out:
            for key in ("session", "delivered_to"):
                if o.get(key):
                    o[key] = session_name(o[key])
        return out

    # last: a session id may hold "/" ({session:path}), so the routes below a session
    # (…/reminders, …/view) must be tried before the session itself
    app.get(base + "/{session:path}", tags=["sessions"])(get_session)

    # -- events ----------------------------------------------------------------------------

    if feed is not None:

        def stream_scope(
            who: Who,
            project: str | None = None,
            session: str | None = None,
            last_event_id: Annotated[str | None, Header()] = None,
            after: Annotated[int | None, Query(ge=0, description="resume after this id")] = None,
        ) -> tuple[str | None, str | None, int | None]:
            """Checked before the stream starts, so a refusal is an ordinary error answer."""
            feed.check_room()
            if who.scope != "admin":
                project = project or who.project
            if who.scope == "session" and who.session is not None:
                session = session or session_name(who.session)
            start = after
            if last_event_id is not None:
                try:
                    start = int(last_event_id)
                except ValueError:
                    raise InvalidInput(
                        "Last-Event-ID must be an event id", code="invalid_argument"
                    ) from None
            if project is not None:
                check_project(project)
                sid = None if session is None else check_session_id(session)
                who.may_use(project, None if sid is None else session_key(project, sid))
                tk.require_project(store.projects, project)
                return project, sid, start  # the stream matches events by the session's name
            if session is not None:
                raise InvalidInput("give project= with session=", code="invalid_argument")
            return None, None, start

        @app.get(
            "/v1/events",
            response_class=StreamingResponse,
            tags=["events"],
            responses={
                200: {
                    "description": "a stream of server-sent events",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                }
            },
        )
        async def events(
            scope: Annotated[tuple[str | None, str | None, int | None], Depends(stream_scope)],
        ) -> Response:
            """Server-sent events: created, modified, paused, resumed, snoozed, cancelled,
            replaced, fired (with the reminder's alarm and announce), delivered, failed,
            skipped, waiting. Each has the store's event id: reconnect with
            ``Last-Event-ID`` (or ``?after=``) to get what was missed."""
            project, session, start = scope
            # Each event is framed once (FastAPI's format_sse_event) for every stream that
            # sends it, and streamed as it is: a fire reaches 100 clients in one pass.
            return StreamingResponse(
                feed.stream((project, session), start),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )

    # -- the web page ----------------------------------------------------------------------

    @app.get("/", include_in_schema=False)
    def index() -> Response:
        page = STATIC / "index.html"
        if not page.exists():
            return JSONResponse({"remindkit": "api", "docs": "/docs", "openapi": "/openapi.json"})
        return FileResponse(page, media_type="text/html")

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> Response:
        for folder in (STATIC, NOTEBOOK_STATIC, ASSETS):
            path = folder / name
            if "/" not in name and not name.startswith(".") and path.is_file():
                return FileResponse(path)
        raise NotFound(f"no file {name!r}", code="not_found")

    return app
