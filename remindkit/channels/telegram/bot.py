"""The bot: long polling (``getUpdates`` with an offset kept in the store), one
turn per message, the outbox sender, ``/reminders`` and ``/cancel``.

Uses python-telegram-bot's :class:`telegram.Bot` directly (no ``Application``):
the offset is confirmed only after an update's work and its reply are stored,
so a bot killed mid-update sees the update again after a restart, and the reply
key (``tg:<bot>:<chat>:in<message id>``) keeps it from being answered twice.

Replies are sent as plain text (no parse mode), so nothing in them needs
escaping and Markdown an agent writes arrives as written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TelegramError, TimedOut
from telegram.request import BaseRequest, HTTPXRequest, RequestData

from ... import failpoints
from ...agent.loop import DEFAULT_SYSTEM, Conversation
from ...clock import now_us
from ...errors import RemindkitError
from ...models import LIVE_STATES, Session
from ...reminders import Reminders
from ...schedules import format_countdown
from ...sessions.openai import OpenAIChatModel
from ...sessions.routed import CHANNEL, CommandChatModel, queue_text
from ...store.outbox import Outbox, OutboxItem, backoff_s
from .threads import Expiry, Threads

log = logging.getLogger(__name__)
TYPING_EVERY_S = 4.0
SEND_IDLE_S = 0.5
SWEEP_EVERY_S = 60.0
SNOOZE = "10m"
MAX_TEXT_IN = 16_000  # characters of an incoming message handed to the agent
DEADLINE_SLACK_S = 2.0  # beyond the sum of a Bot API call's own timeouts
DEADLINE_DEFAULT_S = 30.0  # for a timeout given as None (no limit)
MAX_SEND_ATTEMPTS = 20  # a message Telegram keeps refusing for another reason is failed after this


class TelegramBridge:
    def __init__(
        self,
        api: Reminders,
        bot: Bot,
        *,
        agent: dict[str, Any],
        allow: set[int] | None,
        expiry: Expiry | None = None,
        poll_timeout: int = 30,
    ) -> None:
        self.api = api
        self.store = api.store
        self.bot = bot
        self.agent = agent
        self.allow = allow  # None: every chat
        self.expiry = expiry or Expiry.from_env()
        self.poll_timeout = poll_timeout
        self.outbox = Outbox(self.store, CHANNEL)
        self.owner = f"tgbot:{uuid.uuid4().hex[:12]}"
        self.threads: Threads | None = None
        self.bot_id = 0
        self._poke = asyncio.Event()
        self._polling = asyncio.Event()  # this process holds the poller lease
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- running -------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event, *, on_ready: Callable[[], Any] | None = None) -> None:
        """Poll, send and sweep until ``stop``; ``on_ready`` is called once the bot
        knows who it is (start an engine there, so its fired turns can show typing)."""
        self._loop = asyncio.get_running_loop()
        async with self.bot:
            self.bot_id = self.bot.id
            self.threads = Threads(self.api, bot=self.bot_id, agent=self.agent, expiry=self.expiry)
            if on_ready is not None:
                on_ready()
            tasks = [
                asyncio.create_task(self._hold_poller(stop)),
                asyncio.create_task(self._poll(stop)),
                asyncio.create_task(self._send_loop(stop)),
                asyncio.create_task(self._sweep_loop(stop)),
            ]
            await stop.wait()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _hold_poller(self, stop: asyncio.Event) -> None:
        """Telegram serves getUpdates to one consumer per token: of the bot processes
        on one store, the holder of the lease ``telegram:<bot>:poller`` polls; the
        others send from the outbox and run engines, and take over when its lease
        runs out (a crash)."""
        lease_s = self.api.settings.lease_s
        while not stop.is_set():
            now = now_us(self.api.clock)
            try:
                holder, _prio, _until = await asyncio.to_thread(
                    self.store.coordination.hold_lease,
                    f"telegram:{self.bot_id}:poller",
                    holder=self.owner,
                    priority=0,
                    until_us=now + int(lease_s * 1e6),
                    now_us=now,
                )
                polling = holder == self.owner
            except RemindkitError as exc:
                log.warning("cannot renew the poller lease: %s", exc)
                polling = False
            if polling and not self._polling.is_set():
                log.info("this process polls Telegram now")
            if polling:
                self._polling.set()
            else:
                self._polling.clear()
            await asyncio.sleep(lease_s / 3)

    async def _poll(self, stop: asyncio.Event) -> None:
        flag = f"telegram:{self.bot_id}:offset"
        offset = 0
        failures = 0
        while not stop.is_set():
            if not self._polling.is_set():
                offset = 0
                await self._polling.wait()
                continue
            if not offset:  # (again) the poller: go on from the offset the last poller confirmed
                offset = int(
                    await asyncio.to_thread(self.store.coordination.get_flag, flag, "0") or 0
                )
            try:
                updates = await self.bot.get_updates(
                    offset=offset or None,
                    timeout=self.poll_timeout,
                    allowed_updates=["message", "callback_query"],
                )
                failures = 0
            except RetryAfter as exc:
                await asyncio.sleep(_seconds(exc))
                continue
            except TelegramError as exc:
                failures += 1
                log.warning("getUpdates failed (%s); trying again", type(exc).__name__)
                await asyncio.sleep(backoff_s(failures, cap=30.0))
                continue
            for update in updates:
                if not self._polling.is_set():
                    break  # another process polls now; it goes on from the confirmed offset
                try:
                    await self.handle(update)
                except RemindkitError as exc:
                    log.warning("update %s: %s", update.update_id, exc)
                offset = update.update_id + 1
                await asyncio.to_thread(
                    self.store.coordination.set_flag,
                    flag,
                    str(offset),
                    now_us=now_us(self.api.clock),
                )

    async def _sweep_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            assert self.threads is not None
            try:
                expired = await asyncio.to_thread(self.threads.sweep)
                for sid in expired:
                    log.info("session %s expired", sid)
            except RemindkitError as exc:
                log.warning("expiry sweep failed: %s", exc)
            await asyncio.sleep(SWEEP_EVERY_S)

    # -- incoming ------------------------------------------------------------------------

    def allowed(self, chat: int) -> bool:
        return self.allow is None or chat in self.allow

    async def handle(self, update: Update) -> None:
        if update.callback_query is not None:
            await self._on_button(update)
            return
        msg = update.message
        if msg is None or not msg.text:
            return
        chat = msg.chat_id
        thread = msg.message_thread_id if msg.is_topic_message else None
        if not self.allowed(chat):
            log.info("message from chat %s ignored: not on the allowlist", chat)
            return
        assert self.threads is not None
        route = self.threads.route(chat, thread)
        key = f"tg:{self.bot_id}:{chat}:in{msg.message_id}"
        if await asyncio.to_thread(self.outbox.get, key) is not None:
            return  # answered before a restart; the offset had not been confirmed
        text = msg.text[:MAX_TEXT_IN]
        command, _, rest = text.partition(" ")
        command = command.split("@", 1)[0]
        if command == "/reminders":
            reply, markup = await asyncio.to_thread(self._reminders_view, chat, thread)
            await self._queue(route, key, reply, None, markup)
            return
        if command == "/cancel":
            reply = await asyncio.to_thread(self._cancel_label, chat, thread, rest.strip())
            await self._queue(route, key, reply, None)
            return
        if command == "/start":
            text = "Hello."
        title = msg.chat.title or msg.chat.full_name or None
        sess = await asyncio.to_thread(self.threads.session_for_message, chat, thread, title)
        typing = asyncio.create_task(self._typing(chat, thread))
        try:
            reply = await asyncio.to_thread(self._turn, sess, text)
        finally:
            typing.cancel()
        await self._queue(route, key, reply, sess.id)

    def _turn(self, sess: Session, text: str) -> str:
        config = {k: v for k, v in sess.config.items() if k not in ("agent", "route")}
        if sess.config.get("agent") == "openai":
            model: Any = OpenAIChatModel.from_config(config)
            system = config.get("system", DEFAULT_SYSTEM) or None
        else:
            inner = Session(sess.id, adapter="command", config=config)
            model = CommandChatModel(
                inner, timeout=float(config["timeout"]) if config.get("timeout") else None
            )
            system = None
        conv = Conversation(
            self.api,
            sess.id,
            model,
            system=system,
            tools=sess.config.get("agent") == "openai",
        )
        reply = conv.send(text)
        if not reply.ok:
            return f"(the agent failed: {reply.code}: {reply.error})"[:1000]
        if reply.text.strip():
            return reply.text.strip()
        done = [o for o in reply.tags if o.ok]
        return "✓" if done or not reply.tags else "(no reply)"

    @contextlib.contextmanager
    def typing_while(self, route: dict[str, Any]) -> Iterator[None]:
        """From any thread: a typing action in the route's chat for the ``with`` block
        (a fired turn run by this process's engine); nothing for another bot's route."""
        loop = self._loop
        if loop is None or route.get("bot") != self.bot_id or loop.is_closed():
            yield
            return
        future = asyncio.run_coroutine_threadsafe(
            self._typing(int(route["chat"]), route.get("thread")), loop
        )
        try:
            yield
        finally:
            future.cancel()

    async def _typing(self, chat: int, thread: int | None) -> None:
        while True:
            try:
                await self.bot.send_chat_action(chat, "typing", message_thread_id=thread)
            except TelegramError as exc:
                log.info("typing action failed: %s", type(exc).__name__)
            await asyncio.sleep(TYPING_EVERY_S)

    async def _queue(
        self,
        route: dict[str, Any],
        key: str,
        text: str,
        session: str | None,
        markup: dict[str, Any] | None = None,
    ) -> None:
        await asyncio.to_thread(
            queue_text,
            self.outbox,
            route,
            key=key,
            text=text,
            session=session,
            now=now_us(self.api.clock),
            markup=markup,
        )
        self._poke.set()

    # -- /reminders and its buttons ------------------------------------------------------

    def _reminders_view(self, chat: int, thread: int | None) -> tuple[str, dict[str, Any] | None]:
        assert self.threads is not None
        sess = self.threads.current(chat, thread)
        rems = (
            [] if sess is None else self.api.list(session=sess.id, states=LIVE_STATES, order="next")
        )
        if not rems:
            return "No reminders in this thread.", None
        now = self.api.clock.now()
        lines, rows = [], []
        for r in rems[:20]:
            name = r.label or r.id
            when = (
                "paused"
                if r.next_fire_at is None or r.state != "active"
                else f"in {format_countdown((r.next_fire_at - now).total_seconds())}"
            )
            lines.append(f"• {name}: {when} ({r.schedule.describe()}) — {r.text[:80]}")
            rows.append(
                [
                    {"text": f"✕ {name[:20]}", "callback_data": f"x:{r.id}"},
                    {"text": f"snooze {SNOOZE}", "callback_data": f"z:{r.id}"},
                ]
            )
        return "Reminders in this thread:\n" + "\n".join(lines), {"inline_keyboard": rows}

    def _cancel_label(self, chat: int, thread: int | None, label: str) -> str:
        assert self.threads is not None
        sess = self.threads.current(chat, thread)
        if not label:
            return "Usage: /cancel LABEL"
        if sess is None:
            return "No reminders in this thread."
        try:
            done = self.api.cancel_label(sess.id, label)
        except RemindkitError as exc:
            return f"{exc.code}: {exc.message}"
        return f"Cancelled {label!r} ({len(done)} reminder{'s' if len(done) != 1 else ''})."

    def _press(self, chat: int, thread: int | None, data: str) -> str:
        assert self.threads is not None
        sess = self.threads.current(chat, thread)
        action, _, rid = data.partition(":")
        if sess is None or action not in ("x", "z") or not rid:
            return "Nothing to do."
        try:
            if action == "x":
                self.api.cancel([rid], session=sess.id, reason="cancelled from Telegram")
                return "Cancelled."
            self.api.snooze(rid, SNOOZE, session=sess.id)
            return f"Snoozed for {SNOOZE}."
        except RemindkitError as exc:
            return f"{exc.code}: {exc.message}"[:200]

    async def _on_button(self, update: Update) -> None:
        query = update.callback_query
        assert query is not None
        message = query.message
        chat = message.chat.id if message is not None else None
        if chat is None or not self.allowed(chat) or not isinstance(query.data, str):
            await self.bot.answer_callback_query(query.id, text="Not allowed here.")
            return
        thread = (
            getattr(message, "message_thread_id", None)
            if getattr(message, "is_topic_message", False)
            else None
        )
        answer = await asyncio.to_thread(self._press, chat, thread, query.data[:64])
        await self.bot.answer_callback_query(query.id, text=answer)
        text, markup = await asyncio.to_thread(self._reminders_view, chat, thread)
        try:
            await self.bot.edit_message_text(
                text,
                chat_id=chat,
                message_id=message.message_id,  # type: ignore[union-attr]
                reply_markup=_markup(markup),
            )
        except TelegramError as exc:  # the list stays as it was; the answer said what happened
            log.info("could not refresh the reminders list: %s", type(exc).__name__)

    # -- the outbox sender ---------------------------------------------------------------

    async def _send_loop(self, stop: asyncio.Event) -> None:
        lease_us = int(self.api.settings.lease_s * 1e6)
        while not stop.is_set():
            try:
                items = await asyncio.to_thread(
                    self.outbox.claim,
                    owner=self.owner,
                    now_us=now_us(self.api.clock),
                    lease_us=lease_us,
                    route_prefix=f"telegram:{self.bot_id}:",
                )
            except RemindkitError as exc:
                log.warning("cannot read the outbox: %s", exc)
                items = []
            for result in await asyncio.gather(
                *(self.send(item) for item in items), return_exceptions=True
            ):
                if isinstance(
                    result, Exception
                ):  # the row stays queued; its lease runs out and it is tried again
                    log.error("sending an outbox row failed: %s: %s", type(result).__name__, result)
            if not items:
                self._poke.clear()
                try:
                    await asyncio.wait_for(self._poke.wait(), SEND_IDLE_S)
                except asyncio.TimeoutError:
                    pass

    async def send(self, item: OutboxItem) -> None:
        route = item.route
        failpoints.hit("telegram_before_send")
        try:
            sent = await self.bot.send_message(
                route["chat"],
                item.payload["text"],
                message_thread_id=route.get("thread"),
                reply_markup=_markup(item.payload.get("reply_markup")),
            )
        except RetryAfter as exc:
            wait = _seconds(exc)
            await self._retry(item, f"Telegram asked to wait {wait:g}s (429)", wait)
            return
        except (BadRequest, Forbidden) as exc:
            if item.attempts >= MAX_SEND_ATTEMPTS or isinstance(exc, Forbidden):
                await asyncio.to_thread(
                    self.outbox.fail, item, owner=self.owner, error=f"{type(exc).__name__}: {exc}"
                )
            else:
                await self._retry(item, f"{type(exc).__name__}: {exc}", backoff_s(item.attempts))
            return
        except (TimedOut, NetworkError) as exc:
            await self._retry(item, f"{type(exc).__name__}: {exc}", backoff_s(item.attempts))
            return
        failpoints.hit("telegram_after_send")
        await asyncio.to_thread(
            self.outbox.mark_sent,
            item,
            owner=self.owner,
            now_us=now_us(self.api.clock),
            remote_id=str(sent.message_id),
        )

    async def _retry(self, item: OutboxItem, error: str, wait_s: float) -> None:
        log.info("outbox row %s: %s; next try in %.1fs", item.id, error, wait_s)
        nxt = now_us(self.api.clock) + int(wait_s * 1e6)
        await asyncio.to_thread(
            self.outbox.retry, item, owner=self.owner, error=error, next_attempt_us=nxt
        )


def _seconds(exc: RetryAfter) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value: Any = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def _markup(data: dict[str, Any] | None) -> InlineKeyboardMarkup | None:
    if not data:
        return None
    rows: Sequence[Sequence[dict[str, str]]] = data.get("inline_keyboard") or []
    return InlineKeyboardMarkup(
        [
            [InlineKeyboardButton(b["text"], callback_data=b["callback_data"]) for b in row]
            for row in rows
        ]
    )


_DEFAULT = type(BaseRequest.DEFAULT_NONE)  # a timeout the call did not give


class BoundedRequest(HTTPXRequest):
    """python-telegram-bot's request, with one deadline for the whole call: its
    timeouts are httpx's, which bound each read, so a Bot API endpoint (or a proxy on
    the way) that sends a byte every few seconds held a call for ever. The deadline is
    the call's own timeouts added up (connect, write, read, which a long poll extends,
    and the pool's), plus :data:`DEADLINE_SLACK_S`; past it the call is ``TimedOut``."""

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: Any = BaseRequest.DEFAULT_NONE,
        write_timeout: Any = BaseRequest.DEFAULT_NONE,
        connect_timeout: Any = BaseRequest.DEFAULT_NONE,
        pool_timeout: Any = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        given = self._client.timeout
        total = DEADLINE_SLACK_S
        for value, default in (
            (read_timeout, given.read),
            (write_timeout, given.write),
            (connect_timeout, given.connect),
            (pool_timeout, given.pool),
        ):
            seconds = default if isinstance(value, _DEFAULT) else value
            total += float(seconds) if seconds is not None else DEADLINE_DEFAULT_S
        try:
            return await asyncio.wait_for(
                super().do_request(
                    url,
                    method,
                    request_data,
                    read_timeout=read_timeout,
                    write_timeout=write_timeout,
                    connect_timeout=connect_timeout,
                    pool_timeout=pool_timeout,
                ),
                total,
            )
        except TimeoutError:
            raise TimedOut(f"no whole answer from the Bot API in {total:g}s") from None


def make_bot(token: str, api_url: str | None) -> Bot:
    request = BoundedRequest(connection_pool_size=8, read_timeout=15.0)
    kwargs: dict[str, Any] = {
        "request": request,
        "get_updates_request": BoundedRequest(read_timeout=15.0),
    }
    if api_url:
        kwargs["base_url"] = api_url
    return Bot(token, **kwargs)


__all__ = ["TelegramBridge", "make_bot"]
