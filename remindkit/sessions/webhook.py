"""``webhook`` sessions: agents that live behind HTTP.

``remindkit session add s --webhook URL [--secret-env NAME]``: a fired turn is
POSTed to ``URL`` as JSON::

    {"type": "schedule.fired", "session": "s", "keys": ["<occurrence key>", …],
     "reminders": ["<id>", …], "due": ["<RFC 3339>", …], "message": "<schedule-fired …>…"}

signed as Standard Webhooks does it (so receivers can use its verifiers):
``webhook-id`` is the idempotency key (the occurrence key, or a digest of the
keys of a batch), ``webhook-timestamp`` the Unix time of this attempt,
``webhook-signature`` ``v1,<base64 HMAC-SHA256 of "id.timestamp.body">`` with
the secret ``whsec_<base64>`` read from the environment variable
``--secret-env`` names (default ``REMINDKIT_WEBHOOK_SECRET``; never stored).

Where it may go is the engine's to say, in its own environment
(``REMINDKIT_WEBHOOK_HOSTS``: :mod:`remindkit.sessions.hosts`): by default any name
at a public address; loopback, private and link-local addresses only when listed.
The name is resolved once, each address checked, and the connection made to the
address that was checked. The secret is read only from ``REMINDKIT_WEBHOOK_SECRET``
or a variable listed in ``REMINDKIT_WEBHOOK_SECRET_ENVS``. A URL or a variable the
engine does not allow leaves the fires waiting with the reason (another engine that
allows it may take them); a name that resolves to an address it does not allow is a
failed try (no request is sent). Each try has one deadline for the whole exchange
(``REMINDKIT_WEBHOOK_TIMEOUT``, default 10 s): a receiver that drips its answer is cut
there.

The request goes through the outbox (a row per delivery, written first). A 2xx
answer delivers the turn; a JSON body ``{"reply": "…"}`` is recorded as the
agent's reply and its tags are carried out. Anything else (an error status, a
refused connection, a timeout) puts the row back with back-off (1 s doubling, up
to 5 min) while the fires wait; after the retry window
(``REMINDKIT_WEBHOOK_RETRY_WINDOW``, default 1800 s from the first try) the row
and the fires are recorded ``failed``. A receiver can see a request again (the
answer was lost, or remindkit died before recording it): de-duplicate by
``webhook-id``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..checks import DEFAULT_SECRET_ENV
from ..clock import Clock, SystemClock, format_utc, now_us
from ..models import Fire, Session
from ..store.outbox import FAILED, QUEUED, SENT, NewItem, Outbox, backoff_s
from .base import TurnResult, origin
from .hosts import HostAllowlist

if TYPE_CHECKING:
    import httpx

    from ..agent.external import ExternalTurns
    from ..store import SqlStore

CHANNEL = "webhook"
DEFAULT_WINDOW_S = 1800.0
TIMEOUT_S = 10.0  # the whole exchange of one try (REMINDKIT_WEBHOOK_TIMEOUT)
MAX_RESPONSE = 64_000  # bytes of a receiver's answer that are read
MAX_REPLY = 16_000  # characters of a reply that are recorded


def webhook_id(keys: Sequence[str]) -> str:
    """The idempotency key of a delivery: its occurrence key, or a digest of a batch's."""
    if len(keys) == 1:
        return keys[0]
    return "batch_" + hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()[:32]


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value for ``body`` (Standard Webhooks, v1)."""
    raw = secret[len("whsec_") :] if secret.startswith("whsec_") else secret
    key = base64.b64decode(raw)
    digest = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def retry_window_s() -> float:
    return float(os.environ.get("REMINDKIT_WEBHOOK_RETRY_WINDOW", DEFAULT_WINDOW_S))


def timeout_s() -> float:
    """``REMINDKIT_WEBHOOK_TIMEOUT``: seconds, more than 0 (``invalid_setting`` else)."""
    from ..errors import InvalidInput

    value = os.environ.get("REMINDKIT_WEBHOOK_TIMEOUT", "").strip()
    try:
        seconds = float(value) if value else TIMEOUT_S
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < 86_400:
        raise InvalidInput(
            f"REMINDKIT_WEBHOOK_TIMEOUT: {value[:40]!r} is not a number of seconds",
            code="invalid_setting",
        )
    return seconds


class WebhookSessions:
    """The ``webhook`` adapter (shared: any engine with the secret can post)."""

    name = "webhook"
    shared = True

    def __init__(
        self,
        store: SqlStore,
        *,
        turns: ExternalTurns,
        clock: Clock | None = None,
        transport: httpx.BaseTransport | None = None,
        window_s: float | None = None,
        hosts: HostAllowlist | None = None,
    ) -> None:
        self.store = store
        self.turns = turns
        self.clock: Clock = clock or SystemClock()
        self.transport = transport
        self.window_s = retry_window_s() if window_s is None else window_s
        self.timeout_s = timeout_s()
        self.hosts = HostAllowlist.from_env(os.environ) if hosts is None else hosts
        self.outbox = Outbox(store, CHANNEL)
        self.owner = f"webhook:{uuid.uuid4().hex[:12]}"
        self._next: dict[str, int] = {}  # session -> not before (µs): its row is in back-off

    def can_deliver(self, session: Session) -> bool:
        return bool(session.config.get("url")) and self.why_not(session) is None

    def why_not(self, session: Session) -> str | None:
        aimed = self.hosts.why_not_url(str(session.config.get("url") or ""))
        if aimed is not None:
            return f"webhook receiver not allowed here: {aimed}"
        when = self._next.get(session.id)
        if when is None or now_us(self.clock) >= when:
            return None
        return f"webhook receiver of {session.id} failed; trying again in {(when - now_us(self.clock)) / 1e6:.0f}s"

    def peer(self, session: Session) -> str | None:
        """The receiver's origin: the turns of sessions posting there share a peer."""
        return origin(session.config.get("url"))

    def run_turn(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult:
        handover = self.turns.begin(session.id, fires)
        if handover is None:
            return TurnResult(True, duplicate=True)
        keys = [f.key for f in handover.fires]
        body = {
            "type": "schedule.fired",
            "session": session.id,
            "keys": keys,
            "reminders": list(dict.fromkeys(f.reminder_id for f in handover.fires)),
            "due": [format_utc(f.due_at) for f in handover.fires],
            "message": handover.message,
        }
        now = now_us(self.clock)
        url = str(session.config["url"])
        item = self.outbox.enqueue(
            [
                NewItem(
                    key=webhook_id(keys),
                    route_key=f"webhook:{session.id}",
                    route={"url": url},
                    payload=body,
                    session_id=session.id,
                )
            ],
            now_us=now,
        )[0]
        for old in self.outbox.rows(route=f"webhook:{session.id}", state=QUEUED, limit=100):
            if old.id != item.id and set(old.payload.get("keys") or ()) <= set(keys):
                self.outbox.supersede(old, by=item.key)  # its fires wait in this batch now
        if item.state == SENT:  # posted before; the turn's record was lost with its engine
            self.turns.end(session.id, handover, item.remote_id)
            return TurnResult(True, reply=item.remote_id)
        if item.state == FAILED:
            return TurnResult(False, error=f"webhook gave up: {item.last_error}")
        lease_us = int(self.store.settings.lease_s * 1e6)
        claimed = [
            c
            for c in self.outbox.claim(
                owner=self.owner, now_us=now, lease_us=lease_us, route=f"webhook:{session.id}"
            )
            if c.id == item.id
        ]
        if not claimed:
            self._next[session.id] = max(item.next_attempt_at, now + 1_000_000)
            return TurnResult(
                False, retry=True, error=f"webhook delivery {item.key} waits for its next try"
            )
        item = claimed[0]
        ok, reply, error = self._post(session, item.key, item.payload)
        now = now_us(self.clock)
        if ok:
            self._next.pop(session.id, None)
            self.outbox.mark_sent(item, owner=self.owner, now_us=now, remote_id=reply)
            self.turns.end(session.id, handover, reply)
            return TurnResult(True, reply=reply)
        if (now - item.created_at) / 1e6 >= self.window_s:
            why = f"{error} (given up after {item.attempts} tries in {self.window_s:g}s)"
            self.outbox.fail(item, owner=self.owner, error=why)
            return TurnResult(False, error=f"webhook: {why}")
        nxt = now + int(backoff_s(item.attempts) * 1e6)
        self.outbox.retry(item, owner=self.owner, error=error, next_attempt_us=nxt)
        self._next[session.id] = nxt
        return TurnResult(False, retry=True, error=f"webhook: {error}")

    def _post(
        self, session: Session, msg_id: str, payload: dict[str, Any]
    ) -> tuple[bool, str | None, str]:
        """(delivered, reply, error) of one signed POST."""
        import httpx

        env = str(session.config.get("secret_env") or DEFAULT_SECRET_ENV)
        secret = os.environ.get(env)
        if not secret:
            return False, None, f"the secret variable {env} is not set"
        body = json.dumps(payload, separators=(",", ":")).encode()
        ts = int(self.clock.now().timestamp())
        try:
            signature = sign(secret, msg_id, ts, body)
        except ValueError:
            return False, None, f"the secret in {env} is not whsec_ followed by base64"
        headers = {
            "content-type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(ts),
            "webhook-signature": signature,
        }
        from .transport import BoundedTransport, deadline

        why = self.hosts.why_not_url(str(session.config["url"]))
        if why is not None:
            return False, None, f"not sent: {why}"
        transport = self.transport or BoundedTransport(allow=self.hosts)
        try:
            with (
                deadline(self.timeout_s) as at,
                httpx.Client(transport=transport, timeout=self.timeout_s) as client,
                client.stream(
                    "POST", str(session.config["url"]), content=body, headers=headers
                ) as resp,
            ):
                data = b""
                for chunk in resp.iter_bytes():
                    data += chunk
                    if len(data) > MAX_RESPONSE:
                        break
                    if time.monotonic() > at:
                        raise httpx.ReadTimeout(f"no whole answer in {self.timeout_s:g}s")
                status = resp.status_code
        except httpx.HTTPError as exc:
            return False, None, f"cannot reach the receiver: {type(exc).__name__}: {exc}"[:300]
        if not 200 <= status < 300:
            return False, None, f"the receiver answered HTTP {status}"
        return True, _reply(data), ""


def _reply(data: bytes) -> str | None:
    try:
        parsed: Any = json.loads(data)
    except ValueError:
        return None
    if isinstance(parsed, dict) and isinstance(parsed.get("reply"), str):
        return str(parsed["reply"])[:MAX_REPLY]
    return None


__all__ = ["CHANNEL", "DEFAULT_SECRET_ENV", "WebhookSessions", "sign", "webhook_id"]
