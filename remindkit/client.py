"""A Python client of the HTTP API (``remindkit api``), on httpx.

>>> client = Client()  # the running `remindkit api`, with your local credential  # doctest: +SKIP
>>> rems = client.session("default", "s1").reminders                          # doctest: +SKIP
>>> r = rems.create(prompt="Check the deploy", in_="24h", every="1h")         # doctest: +SKIP
>>> rems.update(r["id"], enabled=False); rems.remove(r["id"])                 # doctest: +SKIP
>>> for event in client.session("default", "s1").events(): ...                # doctest: +SKIP

With no ``token``, the client uses ``REMINDKIT_TOKEN`` (an agent's session token),
else your local credential (:mod:`remindkit.credential`) when the URL is one a
running ``remindkit api`` of your remindkit home listens on; with no URL, that
server's (``REMINDKIT_API_URL`` first). Another URL gets no credential it was not
given. Reminders are the JSON objects of the API (the ``--json`` shape of the CLI). A
refusal raises the exception type the in-process API raises for the same code
(:class:`~remindkit.errors.InvalidSchedule`, ``InvalidInput``, ``LimitExceeded``,
``NotFound``, ``Conflict``, ``Forbidden``, ``Unauthorized``, ``StoreError``), with
``.code`` and ``.message`` from the server. :meth:`events` needs ``httpx-sse``
(the ``client`` extra).
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx

from .errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    InvalidSchedule,
    LimitExceeded,
    ModelError,
    NotFound,
    RemindkitError,
    StoreError,
    Unauthorized,
)

SCHEDULE_CODES = frozenset(
    {
        "invalid_duration",
        "invalid_time",
        "time_not_future",
        "nonexistent_local_time",
        "unknown_time_zone",
        "invalid_cron",
        "interval_too_short",
        "horizon_exceeded",
        "conflicting_schedule",
        "missing_schedule",
        "invalid_repeat",
        "until_not_after_start",
        "no_future_fire",
    }
)
_BY_STATUS: dict[int, type[RemindkitError]] = {
    400: InvalidInput,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    503: StoreError,
}
_UNSET: Any = object()


def error_from_response(response: httpx.Response) -> RemindkitError:
    """The exception for a refusal (``{"error": {"code", "message"}}``)."""
    try:
        err = response.json()["error"]
        code, message = str(err["code"]), str(err["message"])
    except Exception:
        code, message = "store_unavailable", f"HTTP {response.status_code}: {response.text[:200]}"
    cls: type[RemindkitError] = _BY_STATUS.get(response.status_code, StoreError)
    if response.status_code == 502:  # the session's agent failed
        cls = ModelError
    if code in SCHEDULE_CODES:
        cls = InvalidSchedule
    elif code == "too_many_reminders":
        cls = LimitExceeded
    return cls(message, code=code)


class Client:
    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        from .credential import discover

        base_url, token = discover(base_url, token)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url
        self.token = token
        self.http = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise StoreError(
                f"the API at {self.base_url} is not reachable: {exc}", code="store_unavailable"
            ) from exc
        if response.status_code >= 400:
            raise error_from_response(response)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def session(self, project: str, session: str) -> SessionClient:
        return SessionClient(self, project, session)

    def sessions(self, project: str = "default") -> builtins.list[dict[str, Any]]:
        return self.request("GET", f"/v1/projects/{_q(project)}/sessions")

    def status(self) -> dict[str, Any]:
        return self.request("GET", "/v1/status")

    def events(
        self,
        *,
        project: str | None = None,
        session: str | None = None,
        last_event_id: int | None = None,
        reconnect: bool = True,
        read_timeout: float = 60.0,
    ) -> Iterator[dict[str, Any]]:
        """Events as they happen (dicts with ``id``, ``kind``, ``session``,
        ``reminder_id``, ``detail``...). When the connection drops it reconnects with
        ``Last-Event-ID`` and goes on from the last event seen (``reconnect=False``:
        it ends instead). The server pings every 15 s; ``read_timeout`` bounds the
        silence before it reconnects."""
        from httpx_sse import SSEError, connect_sse

        params = {k: v for k, v in (("project", project), ("session", session)) if v is not None}
        last = last_event_id
        delay = 0.2
        while True:
            headers = {} if last is None else {"Last-Event-ID": str(last)}
            try:
                timeout = httpx.Timeout(self.http.timeout.connect, read=read_timeout)
                with connect_sse(
                    self.http, "GET", "/v1/events", params=params, headers=headers, timeout=timeout
                ) as source:
                    if source.response.status_code >= 400:
                        source.response.read()
                        raise error_from_response(source.response)
                    for sse in source.iter_sse():
                        if sse.retry is not None:
                            delay = max(0.05, min(sse.retry / 1000, 30.0))
                        if not sse.id or not sse.data:
                            continue
                        item = sse.json()
                        last = int(sse.id)
                        yield item
            except (httpx.TransportError, SSEError):
                if not reconnect:
                    return
            else:
                if not reconnect:
                    return
            time.sleep(delay)


class SessionClient:
    def __init__(self, client: Client, project: str, session: str) -> None:
        self.client = client
        self.project = project
        self.id = session
        self.path = f"/v1/projects/{_q(project)}/sessions/{_q(session)}"
        self.reminders = RemindersClient(client, self.path + "/reminders")

    def get(self) -> dict[str, Any]:
        return self.client.request("GET", self.path)

    def send(
        self,
        text: str,
        *,
        on_text: Callable[[str], None] | None = None,
        timeout: float = 300.0,
    ) -> dict[str, Any]:
        """Send the person's message to the session's agent; the reply when the turn
        ends: ``{"ok": true, "text", "tags", "error": null}`` (tags stripped from the
        text). ``on_text``: called with the reply's display text so far each time it
        grows (the stream's ``text`` events). A failed turn raises
        :class:`~remindkit.agent.model.ModelError` with the agent's code."""
        path = self.path + "/messages"
        if on_text is None:
            return self.client.request("POST", path, json={"text": text}, timeout=timeout)
        from httpx_sse import connect_sse

        shown = ""
        try:
            with connect_sse(
                self.client.http,
                "POST",
                path,
                json={"text": text},
                headers={"Accept": "text/event-stream"},
                timeout=timeout,
            ) as source:
                if source.response.status_code >= 400:
                    source.response.read()
                    raise error_from_response(source.response)
                for sse in source.iter_sse():
                    data = sse.json() if sse.data else {}
                    if sse.event == "text":
                        shown = shown + data["append"] if "append" in data else data["replace"]
                        on_text(shown)
                    elif sse.event == "error":
                        raise _refusal(data, int(data.get("status") or 409))
                    elif sse.event == "reply":
                        if not data.get("ok"):
                            raise _refusal({"error": data.get("error") or {}}, 502)
                        return dict(data)
        except httpx.TransportError as exc:
            raise StoreError(
                f"the API at {self.client.base_url} is not reachable: {exc}",
                code="store_unavailable",
            ) from exc
        raise StoreError("the stream ended before the reply", code="store_unavailable")

    def events(
        self, *, last_event_id: int | None = None, reconnect: bool = True
    ) -> Iterator[dict[str, Any]]:
        return self.client.events(
            project=self.project, session=self.id, last_event_id=last_event_id, reconnect=reconnect
        )


class RemindersClient:
    def __init__(self, client: Client, path: str) -> None:
        self.client = client
        self.path = path

    def create(
        self,
        prompt: str,
        *,
        name: str | None = None,
        in_: str | int | None = None,
        at: str | None = None,
        every: str | int | None = None,
        cron: str | None = None,
        timezone: str | None = None,
        repeat: int | str | None = None,
        until: str | None = None,
        alarm: bool = False,
        announce: str | None = None,
        on_busy: str | None = None,
        urgency: str | None = None,
        misfire: str | None = None,
    ) -> dict[str, Any]:
        body = {
            "prompt": prompt,
            "name": name,
            "in": in_,
            "at": at,
            "every": every,
            "cron": cron,
            "timezone": timezone,
            "repeat": repeat,
            "until": until,
            "alarm": alarm,
            "announce": announce,
            "on_busy": on_busy,
            "urgency": urgency,
            "misfire": misfire,
        }
        return self.client.request(
            "POST", self.path, json={k: v for k, v in body.items() if v is not None}
        )

    def list(self, *, all: bool = False) -> builtins.list[dict[str, Any]]:
        return self.client.request("GET", self.path, params={"all": "true"} if all else None)

    def get(self, reminder_id: str) -> dict[str, Any]:
        return self.client.request("GET", f"{self.path}/{_q(reminder_id)}")

    def update(
        self,
        reminder_id: str,
        *,
        enabled: bool | None = None,
        snooze: str | int | None = None,
        prompt: str | None = None,
        name: Any = _UNSET,
        version: int | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "enabled": enabled,
            "snooze": snooze,
            "prompt": prompt,
            "version": version,
        }
        body = {k: v for k, v in body.items() if v is not None}
        if name is not _UNSET:
            body["name"] = name
        return self.client.request("PATCH", f"{self.path}/{_q(reminder_id)}", json=body)

    def remove(self, reminder_id: str) -> None:
        self.client.request("DELETE", f"{self.path}/{_q(reminder_id)}")

    def history(self, reminder_id: str, *, limit: int = 100) -> builtins.list[dict[str, Any]]:
        return self.client.request(
            "GET", f"{self.path}/{_q(reminder_id)}/history", params={"limit": limit}
        )


def _refusal(body: dict[str, Any], status: int) -> RemindkitError:
    return error_from_response(httpx.Response(status, json=body))


def _q(part: str) -> str:
    return quote(part, safe="")
