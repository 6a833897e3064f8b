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
import re
from collections.abc import AsyncIterator
from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..checks import MAX_SESSION_ID, check_session_id, session_key, session_name
from ..clock import to_us
from ..credential import LocalCredential
from ..errors import (
    InvalidInput,
    NotFound,
    RemindkitError,
    Unauthorized,
    error_body,
)
from ..models import Reminder, Session
from ..reminders import Reminders
from ..store.projects import check_project
from . import schema
from . import tokens as tk
from .chat import MAX_TURNS as CHAT_TURNS
from .chat import WAIT_S as CHAT_WAIT_S
from .chat import ChatTurns, last_event, stream_turn
from .guard import SCOPE_KEY, Guard, HostNames, status_of

STATIC = FilePath(__file__).with_name("static")
NOTEBOOK_STATIC = FilePath(__file__).parent.parent / "notebook" / "static"
ASSETS = FilePath(__file__).parent.parent / "assets"


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
    of a project whose reminders feature is on; each token holds at most
    ``McpShares.PER_TOKEN`` MCP sessions, each ended after ``settings.mcp_idle_s``
    without a request (``REMINDKIT_MCP_IDLE``, 5 min; the SDK's default is 30). None
    without the ``mcp`` extra."""
    try:
        from ..mcp.http import McpEndpoint
    except ImportError:
        return None
    store = api.store

    def verify(token: str) -> str | None:
        try:
            who = tk.authenticate(store.projects, token)
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

    # Host and Origin: the guard checks them for every route, /mcp too
    idle_s = api.settings.mcp_idle_s
    return McpShares(McpEndpoint(api, verify, session_idle_timeout=idle_s), idle_s=idle_s)


class McpShares:
    """ASGI wrapper of ``/mcp``: one token opens at most ``PER_TOKEN`` MCP sessions
    (``409 too_many_sessions`` past that); a session counts until it is ended
    (``DELETE``), unknown to the server (``404``) or idle for ``idle_s``, when the
    SDK ends it too."""

    PER_TOKEN = 100

    def __init__(self, app: Any, *, idle_s: float) -> None:
        self.app = app
        self.running = app.running  # the outer app runs it (the session manager)
        self.idle_s = idle_s
        self._live: dict[str, dict[str, float]] = {}  # token digest -> session id -> last use
        self._clock = __import__("time").monotonic
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

        # a request naming another revision (2026-07-28: stateless) opens no session
        self._handshakes = {v.encode("latin-1") for v in HANDSHAKE_PROTOCOL_VERSIONS}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        auth = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            await self.app(scope, receive, send)  # the bearer gate refuses it
            return
        key = tk.digest(token.strip())
        now = self._clock()
        mine = self._live.setdefault(key, {})
        for sid, seen in list(mine.items()):
            if now - seen > self.idle_s:
                del mine[sid]
        sid = headers.get(b"mcp-session-id", b"").decode("latin-1")
        if sid:
            if sid in mine:
                mine[sid] = now
        elif (
            scope["method"] == "POST"
            and len(mine) >= self.PER_TOKEN
            and headers.get(b"mcp-protocol-version", b"2025-11-25") in self._handshakes
        ):
            body = json.dumps(
                error_body(
                    "too_many_sessions",
                    f"this token has {self.PER_TOKEN} MCP sessions open; "
                    "end one (DELETE) or wait for an idle one to end",
                )
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 409,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return

        async def watched(message: Any) -> None:
            if message["type"] == "http.response.start":
                status = message["status"]
                made = dict(message.get("headers") or []).get(b"mcp-session-id")
                if made and status < 400 and not sid:
                    mine[made.decode("latin-1")] = self._clock()
                if sid and (status == 404 or (scope["method"] == "DELETE" and status < 300)):
                    mine.pop(sid, None)
            await send(message)

        await self.app(scope, receive, watched)
        if len(self._live) > 10_000:  # tokens whose sessions have all ended
            for k in [k for k, v in self._live.items() if not v]:
                del self._live[k]


def _responses(*statuses: int, **described: str) -> dict[int | str, dict[str, Any]]:
    """The refusals a route answers, each with the error body."""
    text = {
        400: "bad input (a stable code: invalid_argument, invalid_duration, ...)",
        401: "no credential, or an unknown one (unauthorized)",
        403: "outside the credential's scope (forbidden, read_only), the feature off "
        "(feature_disabled), or a request from another site (host_not_allowed, "
        "origin_not_allowed)",
        404: "unknown (not_found, session_not_found, project_not_found)",
        409: "limits and conflicts (too_many_reminders, not_active, conflict, ...)",
        413: "the body is too large (body_too_large)",
        503: "the store is unavailable (store_unavailable)",
    }
    text.update({int(k[1:]): v for k, v in described.items()})
    return {s: {"model": schema.ErrorBody, "description": text[s]} for s in statuses}


READ = (400, 401, 403, 404, 503)
WRITE = (400, 401, 403, 404, 409, 413, 503)


def create_app(
    api: Reminders,
    *,
    engine: Any = None,
    feed: Any = None,
    credential: LocalCredential | None = None,
    names: HostNames | None = None,
    cookie: str = "remindkit",
    instance: str = "",
    adapters: Any = None,
    chat_wait_s: float = CHAT_WAIT_S,
    chat_turns: int = CHAT_TURNS,
) -> FastAPI:
    """The application over ``api``. Every ``/v1/`` request needs a credential:
    ``credential`` (the user's own, or its login cookie ``cookie``) or a stored token.
    ``chat_wait_s`` / ``chat_turns``: how long a message waits for its busy session,
    and how many typed turns run at once (:class:`~remindkit.api.chat.ChatTurns`)."""
    store = api.store
    mcp_app = mcp_over_http(api)
    ReminderIn, ReminderPatch = schema.input_models(api.settings.limits)
    MessageIn = schema.message_model(api.settings.limits, api.settings.model.max_message_chars)
    if adapters is None:
        if engine is not None:
            adapters = engine.adapters
        else:
            from ..sessions.registry import default_adapters

            adapters = default_adapters(api=api)
    turns = ChatTurns(adapters, wait_s=chat_wait_s, max_turns=chat_turns)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if mcp_app is None:
            yield
            return
        async with mcp_app.running():  # the MCP session manager
            yield

    app = FastAPI(
        title="remindkit",
        version="1",
        description=__doc__,
        lifespan=lifespan,
        generate_unique_id_function=lambda route: route.name,
    )
    app.state.api = api
    app.state.engine = engine
    if mcp_app is not None:
        from ..mcp.http import routes

        app.router.routes.extend(routes(mcp_app, "/mcp"))  # /mcp and /mcp/, no redirect
    app.add_middleware(
        Guard,
        projects=store.projects,
        credential=credential,
        names=names or HostNames(),
        cookie=cookie,
        instance=instance,
    )

    @app.exception_handler(RemindkitError)
    async def _refusal(_request: Request, exc: RemindkitError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
        return JSONResponse(
            error_body(exc.code, body_words(exc.message)),
            status_code=status_of(exc),
            headers=headers,
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
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(
            exc.status_code, "invalid_argument"
        )
        headers = exc.headers
        if exc.status_code == 405:  # every method of the path, not just the first route's
            headers = {"Allow": ", ".join(sorted(_methods_of(app, request.scope)))}
        return JSONResponse(
            error_body(code, str(exc.detail)), status_code=exc.status_code, headers=headers
        )

    def who_of(request: Request) -> tk.Principal:
        """Who the request acts as: the guard checked its credential before the body.
        The reminder routes ask it themselves: as a dependency (``Who``) it costs
        FastAPI a second solving of parameters on every request."""
        who = request.scope.get(SCOPE_KEY)
        if who is None:
            raise Unauthorized("a credential is needed", code="unauthorized")
        return who

    async def principal(request: Request) -> tk.Principal:
        """:func:`who_of` as a dependency. A coroutine, so that FastAPI runs it on the
        event loop: a plain function dependency is run in the thread pool, and the
        hop there and back cost more than a whole create (``bench/api_speed.py``)."""
        return who_of(request)

    Who = Annotated[tk.Principal, Depends(principal)]

    def in_project(
        who: tk.Principal, project: str, session: str | None, *, write: bool = False
    ) -> tuple[str | None, Session | None]:
        """Let the request in (one read of the store: project, session): its session's
        id in the store (the project's own namespace: checks.session_key) and the
        session, when it is one of the project's."""
        check_project(project)
        sid = None if session is None else session_key(project, str(check_session_id(session)))
        sess = tk.admit(store.projects, who, project, sid, write=write, now_us=now_us())
        return sid, sess

    def own(rem: Reminder, sid: str | None, sess: Session | None) -> Reminder:
        """The reminder, if it is one of this session's (in this project)."""
        if sess is None or rem.session != sid:
            raise NotFound.reminder(rem.id)
        return rem

    def now_us() -> int:
        return to_us(api.clock.now())

    base = "/v1/projects/{project}/sessions"
    Project = Annotated[
        str,
        Path(
            description="a project name",
            json_schema_extra={"pattern": PROJECT_PATTERN, "examples": ["default"]},
        ),
    ]
    SessionId = Annotated[
        str,
        Path(
            description="a session id (may hold /)",
            json_schema_extra={"maxLength": MAX_SESSION_ID, "examples": ["s1"]},
        ),
    ]

    # -- service ---------------------------------------------------------------------------

    @app.get(
        "/healthz",
        tags=["service"],
        response_model=schema.Health,
        responses=_responses(403, 503),
        openapi_extra={"security": []},
    )
    def healthz() -> dict[str, Any]:
        store.coordination.get_flag("paused_all")  # answers only if the store does
        return {"ok": True}

    @app.get(
        "/v1/status",
        tags=["service"],
        response_model=schema.Status,
        responses=_responses(401, 403, 503),
    )
    def get_status(who: Who) -> dict[str, Any]:
        t = now_us()
        engines = api.engines()
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

    @app.get(
        base,
        tags=["sessions"],
        response_model=builtins.list[schema.SessionOut],
        responses=_responses(*READ),
    )
    def list_sessions(project: Project, who: Who) -> Response:
        in_project(who, project, None)
        return JSONResponse(
            [
                session_out(s, project)
                for s in store.projects.project_sessions(project, now_us=now_us())
            ]
        )

    def get_session(project: Project, session: SessionId, who: Who) -> Response:
        sid, got = in_project(who, project, session)
        if got is None:
            raise NotFound(
                f"No session by the id of {sid!r} was found", code="session_not_found", session=sid
            )
        return JSONResponse(session_out(got, project))

    @app.get(
        base + "/{session:path}/view",
        tags=["sessions"],
        response_model=schema.View,
        responses=_responses(*READ),
    )
    def get_session_view(project: Project, session: SessionId, who: Who) -> Response:
        """What the web page shows: the live reminders as pills (``due_ms``) and the
        conversation as lines, a fired turn as one marker (the notebook panel's view)."""
        from ..notebook.state import TRANSCRIPT_LINES, chat_lines, pills
        from ..schedules.zones import get_zone

        sid, sess = in_project(who, project, session)
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

    @app.post(
        base + "/{session:path}/messages",
        tags=["sessions"],
        response_model=schema.MessageReply,
        responses={
            200: {
                "description": "the reply (tags stripped; the tags it carried out), or with "
                "`Accept: text/event-stream` a stream of events: started, waiting, text "
                "(`append` or `replace`), tool, then reply (this body) or error",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
            **_responses(
                *WRITE,
                502,
                _409="no agent to talk to (no_agent, agent_not_allowed), the session busy "
                "past the wait (session_busy), deleted (session_deleted), too_many_turns",
                _502="the agent failed (model_unreachable, model_http_error, ...)",
            ),
        },
    )
    async def post_message(
        project: Project,
        session: SessionId,
        body: MessageIn,  # type: ignore[valid-type]
        who: Who,
        request: Request,
    ) -> Response:
        """Send the person's message to the session's agent: one turn through the
        session's adapter (an ``openai`` session's model), with its tags and tool calls
        carried out. The session is busy meanwhile: a fire due during it waits and comes
        as its own turn after. Streamed as it is produced with ``Accept: text/event-stream``."""
        sid, sess = in_project(who, project, session, write=True)
        if sess is None:
            raise NotFound(
                f"No session by the id of {sid!r} was found", code="session_not_found", session=sid
            )
        events = turns.start(sess, body.text)  # type: ignore[attr-defined]
        if "text/event-stream" in request.headers.get("accept", ""):
            return StreamingResponse(
                stream_turn(events),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        kind, data = await last_event(events)
        if kind == "refused":
            status = data.pop("status", 409)
            return JSONResponse(data, status_code=status)
        if not data["ok"]:
            return JSONResponse({"error": data["error"]}, status_code=502)
        return JSONResponse(data)

    # -- reminders -------------------------------------------------------------------------

    @app.get(
        base + "/{session:path}/reminders",
        tags=["reminders"],
        response_model=builtins.list[schema.Reminder],
        responses=_responses(*READ),
    )
    async def list_reminders(
        project: Project,
        session: SessionId,
        request: Request,
        all: Annotated[bool, Query(description="finished ones too")] = False,
    ) -> Response:
        who = who_of(request)
        sid, sess = in_project(who, project, session)
        if sess is None or sid is None:
            return JSONResponse([])
        return reminders_response(api.list(session=sid, all=all))

    @app.post(
        base + "/{session:path}/reminders",
        status_code=201,
        tags=["reminders"],
        response_model=schema.ReminderCreated,
        responses={
            201: {
                "description": "the reminder",
                "headers": {
                    "Location": {
                        "description": "its URL",
                        "schema": {"type": "string"},
                    }
                },
            },
            **_responses(*WRITE),
        },
    )
    async def create_reminder(
        project: Project,
        session: SessionId,
        body: ReminderIn,  # type: ignore[valid-type]
        request: Request,
    ) -> Response:
        b: Any = body
        who = who_of(request)
        sid, _sess = in_project(who, project, session, write=True)
        assert sid is not None
        created = api.add(schema.reminder_spec(b, session=sid, project=project))
        rem = created.reminder
        # reminder_out(rem) with "replaced" after its fields, as JSONResponse encoded it
        body = _reminder_json(rem)[:-1] + b',"replaced":' + _ENCODE(list(created.replaced)).encode()
        return Response(
            body + b"}",
            media_type=JSON_TYPE,
            status_code=201,
            headers={
                "Location": f"/v1/projects/{project}/sessions/{session_name(sid)}/reminders/{rem.id}"
            },
        )

    @app.get(
        base + "/{session:path}/reminders/{reminder_id}",
        tags=["reminders"],
        response_model=schema.Reminder,
        responses=_responses(*READ),
    )
    async def get_reminder(
        project: Project, session: SessionId, reminder_id: str, request: Request
    ) -> Response:
        who = who_of(request)
        sid, sess = in_project(who, project, session)
        return JSONResponse(reminder_out(own(api.get(reminder_id), sid, sess)))

    @app.patch(
        base + "/{session:path}/reminders/{reminder_id}",
        tags=["reminders"],
        response_model=schema.Reminder,
        responses=_responses(*WRITE),
    )
    async def update_reminder(
        project: Project,
        session: SessionId,
        reminder_id: str,
        body: ReminderPatch,  # type: ignore[valid-type]
        request: Request,
    ) -> Response:
        b: Any = body
        who = who_of(request)
        sid, sess = in_project(who, project, session, write=True)
        own(api.get(reminder_id), sid, sess)
        rem = api.update(
            reminder_id,
            text=b.prompt,
            label=b.name if "name" in b.model_fields_set else Any,
            enabled=b.enabled,
            snooze=b.snooze,
            version=b.version,
            session=sid,
        )
        return JSONResponse(reminder_out(rem))

    @app.delete(
        base + "/{session:path}/reminders/{reminder_id}",
        status_code=204,
        tags=["reminders"],
        response_class=Response,
        responses={204: {"description": "cancelled (kept in history)"}, **_responses(*WRITE)},
    )
    async def delete_reminder(
        project: Project, session: SessionId, reminder_id: str, request: Request
    ) -> Response:
        who = who_of(request)
        sid, sess = in_project(who, project, session, write=True)
        own(api.get(reminder_id), sid, sess)
        api.cancel([reminder_id], session=sid)
        return Response(status_code=204)

    @app.get(
        base + "/{session:path}/reminders/{reminder_id}/history",
        tags=["reminders"],
        response_model=builtins.list[schema.Fire],
        responses=_responses(*READ),
    )
    def get_reminder_history(
        project: Project,
        session: SessionId,
        reminder_id: str,
        request: Request,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> Response:
        who = who_of(request)
        sid, sess = in_project(who, project, session)
        own(api.get(reminder_id), sid, sess)
        out = [o.to_dict() for o in api.history(reminder_id, limit=limit)]
        for o in out:
            for key in ("session", "delivered_to"):
                if o.get(key):
                    o[key] = session_name(o[key])  # as its project names it
        return JSONResponse(out)

    # last: a session id may hold "/" ({session:path}), so the routes below a session
    # (…/reminders, …/view) must be tried before the session itself
    app.get(
        base + "/{session:path}",
        tags=["sessions"],
        response_model=schema.SessionOut,
        responses=_responses(*READ),
    )(get_session)

    # -- events ----------------------------------------------------------------------------

    if feed is not None:

        def stream_scope(
            who: Who,
            project: str | None = None,
            session: str | None = None,
            last_event_id: Annotated[
                str | None,
                Header(description="resume after this event id (0 to 2^63-1)", max_length=19),
            ] = None,
            after: Annotated[
                int | None, Query(ge=0, le=EVENT_ID_MAX, description="resume after this id")
            ] = None,
        ) -> tuple[tk.Principal, str | None, str | None, int | None]:
            """Checked before the stream starts, so a refusal is an ordinary error answer."""
            feed.check_room(who)
            if who.scope != "admin":
                project = project or who.project
            if who.scope == "session" and who.session is not None:
                session = session or session_name(who.session)
            start = after if last_event_id is None else event_id(last_event_id)
            if project is not None:
                check_project(project)
                sid = None if session is None else check_session_id(session)
                who.may_use(project, None if sid is None else session_key(project, sid))
                tk.require_project(store.projects, project)
                return who, project, sid, start  # events are matched by the session's name
            if session is not None:
                raise InvalidInput("give project= with session=", code="invalid_argument")
            return who, None, None, start

        @app.get(
            "/v1/events",
            response_class=StreamingResponse,
            tags=["events"],
            responses={
                200: {
                    "description": "a stream of server-sent events",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                },
                **_responses(
                    400, 401, 403, 404, 409, 503, _409="too many streams (too_many_streams)"
                ),
            },
        )
        async def stream_events(
            scope: Annotated[
                tuple[tk.Principal, str | None, str | None, int | None], Depends(stream_scope)
            ],
        ) -> Response:
            """Server-sent events: created, modified, paused, resumed, snoozed, cancelled,
            replaced, fired (with the reminder's alarm and announce), delivered, failed,
            skipped, waiting. Each has the store's event id: reconnect with
            ``Last-Event-ID`` (or ``?after=``) to get what was missed. A stream ends
            within a second when its token is revoked or its project's feature is
            turned off."""
            who, project, session, start = scope
            # Each event is framed once (FastAPI's format_sse_event) for every stream that
            # sends it, and streamed as it is: a fire reaches 100 clients in one pass.
            return StreamingResponse(
                feed.stream((project, session), start, who=who),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )

    # -- the web page ----------------------------------------------------------------------

    @app.get("/", include_in_schema=False)
    def index() -> Response:
        page = STATIC / "index.html"
        if not page.exists():
            return JSONResponse({"remindkit": "api", "docs": "/docs", "openapi": "/openapi.json"})
        return FileResponse(page, media_type="text/html", headers=PAGE_HEADERS)

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> Response:
        for folder in (STATIC, NOTEBOOK_STATIC, ASSETS):
            path = folder / name
            if "/" not in name and not name.startswith(".") and path.is_file():
                return FileResponse(path)
        raise NotFound(f"no file {name!r}", code="not_found")

    app.openapi = lambda: _openapi(app, cookie)  # type: ignore[method-assign]
    return app


# the reminders API words its refusals for the command line; a body names its fields
_FLAG = re.compile(r"--(in|at|every|cron|tz|timezone|repeat|until|label|announce|alarm)\b")
_FIELD = {"tz": "timezone", "label": "name"}


def body_words(message: str) -> str:
    """``give either --in or --at`` as ``give either "in" or "at"``: the body's field
    names, not the command line's flags."""
    if "--" not in message:
        return message
    return _FLAG.sub(lambda m: f'"{_FIELD.get(m.group(1), m.group(1))}"', message)


def _methods_of(app: FastAPI, scope: Any) -> set[str]:
    """The methods of every route whose path fits (a session id may hold "/")."""
    found: set[str] = set()
    below: set[str] = set()  # of the routes below a session (…/messages): they are what fits
    for route in app.router.routes:
        methods = getattr(route, "methods", None)
        regex = getattr(route, "path_regex", None)
        if methods and regex is not None and regex.match(scope["path"]):
            if getattr(route, "path", "").endswith("{session:path}"):
                found |= set(methods)
            else:
                below |= set(methods)
    return below or found


PROJECT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"  # check_project's
EVENT_ID_MAX = 2**63 - 1
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; media-src 'self' blob: data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "Cache-Control": "no-store",
}


def event_id(text: str) -> int:
    """A ``Last-Event-ID``: an event id, 0 to 2^63-1, in decimal digits."""
    value = text.strip()
    if not value or len(value) > 19 or not value.isascii() or not value.isdigit():
        raise InvalidInput(
            "Last-Event-ID must be an event id (0 to 2^63-1)", code="invalid_argument"
        )
    number = int(value)
    if number > EVENT_ID_MAX:
        raise InvalidInput(
            "Last-Event-ID must be an event id (0 to 2^63-1)", code="invalid_argument"
        )
    return number


def _openapi(app: FastAPI, cookie: str) -> dict[str, Any]:
    """FastAPI's document, made exact: no 422 (a refusal of input is a 400 with the
    error body), the credential as security schemes (a bearer token, or the login
    cookie) instead of a header parameter, and the guard's refusals."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    from fastapi.openapi.utils import get_openapi

    doc = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    for name in ("ReminderIn", "ReminderPatch"):  # request bodies: a default is the server's
        for prop in schemas.get(name, {}).get("properties", {}).values():
            # said in words: generators (openapi-typescript) make a field with a default required
            if "default" in prop and prop["default"] is not None:
                text = prop.get("description", "")
                prop["description"] = (text + "; " if text else "") + f"default {prop['default']!r}"
            prop.pop("default", None)
    components["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "the local credential (found by the SDKs in the remindkit home) "
            "or a token of `remindkit token create`",
        },
        "cookie": {
            "type": "apiKey",
            "in": "cookie",
            "name": cookie,
            "description": "the browser's login (`remindkit api open`)",
        },
    }
    doc["security"] = [{"bearer": []}, {"cookie": []}]
    for path in doc.get("paths", {}).values():
        for op in path.values():
            op.get("responses", {}).pop("422", None)
            op["parameters"] = [
                p for p in op.get("parameters", []) if p.get("name") != "authorization"
            ] or op.pop("parameters", None)
            if op.get("parameters") is None:
                op.pop("parameters", None)
    app.openapi_schema = doc
    return doc
