"""``remindkit chat`` and ``remindkit demo``.

``remindkit chat --base-url URL --model NAME [--session ID]``: a terminal chat
with an OpenAI-compatible endpoint, kept in the store as an ``openai`` session.
An engine runs in the process, so reminders the agent sets fire here; a fired
reminder arrives as a new turn while you are idle and shows as a short marker
and the agent's reply. ``/reminders`` lists the session's reminders, ``/quit``
(or end of input) leaves.

The agent's own timers (``set_callback``) have their surface here too:
``/callbacks [list|pause|resume|cancel [N]]`` (the four offered as you type, on a
terminal with prompt_toolkit: the ``chat`` extra), the ``[CB:2 2:14]`` indicator in
the bar below the prompt, and the transcript lines ``[Callback] Timer fired`` (then
the timer's message as the next turn) and ``[Callback] Deferred 30s — agent busy``
(a timer that came due during a turn: it fires one full delay after the turn).
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

from .context import Context
from .scope import session_or_none

if TYPE_CHECKING:
    from ..reminders import Reminders
    from ..wiring import Graph
from .inert import lines as inert
from .inert import one_line


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    c = sub.add_parser(
        "chat",
        parents=[common],
        help="chat with an OpenAI-compatible model; reminders come back as turns",
    )
    c.add_argument(
        "--base-url",
        required=True,
        help="e.g. http://127.0.0.1:11434/v1 (Ollama), http://127.0.0.1:8080/v1",
    )
    c.add_argument("--model", required=True)
    c.add_argument(
        "--session", help="session id (default: a new one); an existing openai session is resumed"
    )
    c.add_argument(
        "--api-key-env", help="environment variable holding the API key (default OPENAI_API_KEY)"
    )
    c.add_argument(
        "--system",
        help="the session's system prompt, for typed and fired turns alike (default: the "
        "session's own, else remindkit's, which explains the tags); \"\" for none",
    )
    c.add_argument(
        "--no-engine",
        action="store_true",
        help="do not run an engine here (another process delivers)",
    )
    d = sub.add_parser(
        "demo",
        parents=[common],
        help="the whole loop with a scripted local model (no model server)",
    )
    d.add_argument(
        "--delay", type=int, default=3, help="seconds until the demo reminder fires (default 3)"
    )
    d.add_argument("--no-alerts", action="store_true", help="no alarm or speech")
    c.set_defaults(func=chat_command)
    d.set_defaults(func=demo_command)


def chat_command(cx: Context) -> int:
    cx.args.session = session_or_none(cx.args)
    return run_chat(cx.args, cx.graph, cx.out, cx.inp)


def demo_command(cx: Context) -> int:  # a store of its own unless --db is given
    return run_demo_command(cx.args, cx.out)


def run_chat(args: argparse.Namespace, graph: Graph, out: TextIO, inp: TextIO) -> int:
    from ..chats import ChatSession

    api = graph.api
    engine = None if args.no_engine else graph.engine(alerter="local", role="chat")
    extra: dict[str, Any] = {} if args.system is None else {"system": args.system}
    chat = ChatSession(
        graph,
        session=args.session,
        base_url=args.base_url,
        model=args.model,
        api_key_env=args.api_key_env,
        engine=engine,
        **extra,
    )
    view = _ChatView(chat, out)
    terminal = _terminal_prompt(view) if _is_tty(inp) else None
    view.interactive = _is_tty(inp) and terminal is None
    out.write(
        f"remindkit chat: {args.model} at {args.base_url}, session {chat.id}. "
        "Reminders come back here while you are idle. /reminders lists them, "
        "/callbacks the agent's timers, /quit leaves.\n"
    )
    out.flush()
    if engine is not None:
        engine.start()
    view.start()
    try:
        with terminal.patched() if terminal is not None else _nothing():
            if terminal is not None:
                view.out = terminal.stdout()
            while True:
                if terminal is not None:
                    try:
                        line = terminal.read()
                    except KeyboardInterrupt:
                        continue
                    except EOFError:
                        break
                else:
                    view.prompt()
                    line = inp.readline()
                    view.typed()
                    if not line:
                        break
                text = line.strip()
                if not text:
                    continue
                if text in ("/quit", "/exit"):
                    break
                if text == "/reminders":
                    view.reminders(api)
                    continue
                if text == "/callbacks" or text.startswith("/callbacks "):
                    view.callbacks(text.split()[1:])
                    continue
                view.send(text)
    finally:
        view.stop()
        chat.close()
        if engine is not None:
            engine.stop()
            engine.close()
    return 0


CALLBACK_ACTIONS = ("list", "pause", "resume", "cancel")
COMMANDS = ("/callbacks", "/reminders", "/quit")


@contextlib.contextmanager
def _nothing() -> Iterator[None]:
    yield


class _TerminalPrompt:
    """The input line on a terminal (prompt_toolkit): completion of the commands and of
    ``/callbacks``' sub-arguments as you type, the ``[CB:n m:ss]`` indicator in the
    bar below (redrawn every second), and output from other threads above the prompt."""

    def __init__(self, view: _ChatView) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.completion import Completer, Completion

        class Commands(Completer):
            def get_completions(self, document: Any, _event: Any) -> Iterator[Any]:
                before = document.text_before_cursor
                if before.startswith("/callbacks "):
                    words = before.split(" ")
                    if len(words) == 2:
                        for action in CALLBACK_ACTIONS:
                            if action.startswith(words[1]):
                                yield Completion(action, start_position=-len(words[1]))
                elif before.startswith("/") and " " not in before:
                    for command in COMMANDS:
                        if command.startswith(before):
                            yield Completion(command, start_position=-len(before))

        self.view = view
        self.session: Any = PromptSession(
            completer=Commands(),
            complete_while_typing=True,
            bottom_toolbar=view.indicator,
            refresh_interval=1.0,
        )

    def patched(self) -> Any:
        from prompt_toolkit.patch_stdout import patch_stdout

        return patch_stdout(raw=True)

    def stdout(self) -> TextIO:
        import sys

        return sys.stdout

    def read(self) -> str:
        return str(self.session.prompt(PROMPT))


def _terminal_prompt(view: _ChatView) -> _TerminalPrompt | None:
    try:
        return _TerminalPrompt(view)
    except ImportError:  # without the chat extra: a plain input line
        return None
    except Exception:  # not a terminal prompt_toolkit can drive
        return None


class _ChatView:
    """Prints the conversation: your turns as they finish, and fired turns (run
    by any engine) as they land while you are idle."""

    def __init__(self, chat: Any, out: TextIO) -> None:
        self.chat = chat
        self.out = out
        self.lock = threading.Lock()
        self.seen = chat.last_seq()
        self._stop = threading.Event()
        self._own_turn = False
        self._waiting = False  # the input prompt is on screen
        self.interactive = False  # show an input prompt (a terminal)
        self._noted: set[tuple[int, str, str]] = {
            (e.seq, e.who, e.text) for e in chat.delivery_notes()
        }
        self._thread = threading.Thread(target=self._poll, daemon=True, name="remindkit-chat-view")
        self._cb: dict[str, Any] = {"active": 0, "paused": 0, "next_us": None}
        self._cb_read = 0.0
        self._deferred: set[str] = set()  # occurrence keys already said to be deferred
        self._since_us = time.time_ns() // 1000

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)
        with self.lock:  # what landed since the last look is shown before leaving
            self._waiting = False
            try:
                self._drain()
            except Exception:  # the store may be away: nothing more to show
                pass

    def prompt(self) -> None:
        if not self.interactive:
            return
        with self.lock:
            self.out.write(PROMPT)
            self.out.flush()
            self._waiting = True

    def typed(self) -> None:
        with self.lock:
            self._waiting = False

    def send(self, text: str) -> None:
        from ..clock import format_utc

        with self.lock:
            self._drain()
            self._own_turn = True
        try:
            reply = self.chat.send(text)
        except Exception:
            with self.lock:
                self._own_turn = False
            raise
        with self.lock:
            self._own_turn = False
            if reply.ok:
                self.out.write(f"agent> {inert(reply.text)}\n")
                for o in reply.tags:
                    if o.ok and o.reminder is not None:
                        self.out.write(
                            f"  (reminder '{one_line(o.reminder.label)}' set for {format_utc(o.reminder.next_fire_at)})\n"
                        )
                    elif o.ok:
                        self.out.write(f"  (cancelled {one_line(', '.join(o.cancelled))})\n")
                    else:
                        self.out.write(f"  (tag not carried out: {one_line(o.code)})\n")
            else:
                self.out.write(f"error: {reply.code}: {one_line(reply.error)}\n")
            if reply.messages:
                self.seen = max(self.seen, max(m.seq for m in reply.messages))
            self.out.flush()

    def reminders(self, api: Reminders) -> None:
        from ..clock import format_utc

        rems = api.list(session=self.chat.id)
        with self.lock:
            if not rems:
                self.out.write("no reminders\n")
            for r in rems:
                self.out.write(
                    f"  {one_line(r.id)}  {one_line(r.label or '-')}  {r.state}  next {format_utc(r.next_fire_at) or '-'}"
                    f"  {one_line(r.schedule.describe())}\n"
                )
            self.out.flush()

    # -- the agent's timers (set_callback) ---------------------------------------------

    def _callbacks(self) -> list[Any]:
        from ..agent.callbacks import callbacks
        from ..agent.context import ToolContext

        return callbacks(ToolContext(self.chat.graph.api, self.chat.id))

    def callbacks(self, words: list[str]) -> None:
        """``/callbacks [list|pause|resume|cancel [N]]``."""
        from ..agent.callbacks import popup_lines, set_callback
        from ..agent.context import ToolContext

        api = self.chat.graph.api
        action = words[0] if words else "list"
        rest = words[1:]
        lines: list[str]
        if action not in CALLBACK_ACTIONS or (rest and action != "cancel") or len(rest) > 1:
            lines = ["usage: /callbacks [list | pause | resume | cancel [N]]"]
        elif action == "cancel":
            slot: int | None = None
            if rest:
                if not rest[0].isascii() or not rest[0].isdigit():
                    lines = [f"Error: {one_line(rest[0])} is not a slot number"]
                    self._write(lines)
                    return
                slot = int(rest[0])
            done = set_callback(
                ToolContext(api, self.chat.id), {"action": "cancel", "callback_id": slot}
            )
            lines = [done.content]
        else:
            live = self._callbacks()
            if action in ("pause", "resume") and live:
                ids = [
                    r.id for r in live if r.state == ("active" if action == "pause" else "paused")
                ]
                if ids:
                    (api.pause if action == "pause" else api.resume)(ids, session=self.chat.id)
                live = self._callbacks()
            lines = [one_line(x) for x in popup_lines(live, api.clock.now())]
        self._refresh_cb(force=True)
        self._write(lines)

    def indicator(self) -> str:
        """``[CB:2 2:14]`` for the bar below the prompt ("" when no timer is set)."""
        from .. import statusfile

        return statusfile.callbacks_indicator(self._cb, now_us=time.time_ns() // 1000)

    def _refresh_cb(self, *, force: bool = False) -> None:
        if not force and time.monotonic() - self._cb_read < 1.0:
            return
        self._cb_read = time.monotonic()
        live = self._callbacks()
        nxt = [r.next_fire_at for r in live if r.state == "active" and r.next_fire_at]
        from ..clock import to_us

        self._cb = {
            "active": sum(r.state == "active" for r in live),
            "paused": sum(r.state == "paused" for r in live),
            "next_us": to_us(min(nxt)) if nxt else None,
        }

    def _deferrals(self) -> list[str]:
        """``[Callback] Deferred 30s — agent busy`` for each timer that came due while
        the agent was busy (re-based: it fires one full delay after the turn)."""
        from ..clock import to_us
        from ..models import WaitFor

        out: list[str] = []
        store = self.chat.store
        for occ in store.reminders.history(session=self.chat.id, limit=20):
            if occ.wait_for != WaitFor.REBASE or occ.key in self._deferred:
                continue
            if occ.fired_at is None or to_us(occ.fired_at) < self._since_us:
                continue
            self._deferred.add(occ.key)
            try:
                rem = store.reminders.get_reminder(occ.reminder_id)
            except Exception:
                continue
            if rem.source == "callback":
                out.append(f"[Callback] Deferred {rem.schedule.every_s or 0}s — agent busy")
        return out

    def _write(self, lines: list[str]) -> None:
        with self.lock:
            if self._waiting:
                self.out.write("\n")
            self.out.write("".join(f"{line}\n" for line in lines))
            if self._waiting:
                self.out.write(PROMPT)
            self.out.flush()

    def _poll(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self._refresh_cb()
                deferred = self._deferrals()
                if deferred:
                    self._write(deferred)
                with self.lock:
                    if not self._own_turn:
                        self._drain()
            except Exception:  # the store may be briefly unavailable; try again
                continue

    def _drain(self) -> None:
        from ..chats.session import display_entries

        out: list[str] = []
        messages = self.chat.messages(after_seq=self.seen)
        by_seq = {m.seq: m for m in messages}
        for entry in display_entries(messages):
            self.seen = max(self.seen, entry.seq)
            if entry.who == "fired":
                timers = self._timer_texts(by_seq[entry.seq].content or "")
                if timers is None:
                    out.append(inert(entry.text))
                else:  # the agent's own timer: the seed's transcript lines
                    out.append("[Callback] Timer fired")
                    out.extend(f"{PROMPT}{inert(t)}" for t in timers)
            elif entry.who == "agent":
                out.append(f"agent> {inert(entry.text)}")
            elif entry.who == "you":
                out.append(f"{PROMPT}{inert(entry.text)}")
        for (
            note
        ) in self.chat.delivery_notes():  # failed fired turns, replies from a fallback session
            if (note.seq, note.who, note.text) not in self._noted:
                self._noted.add((note.seq, note.who, note.text))
                out.append(
                    f"agent> {inert(note.text)}" if note.who == "fallback" else inert(note.text)
                )
        if not out:
            return
        if self._waiting:  # printed while you are at the prompt: above it, and the prompt again
            self.out.write("\n")
        self.out.write("".join(f"{line}\n" for line in out))
        if self._waiting:
            self.out.write(PROMPT)
        self.out.flush()

    def _timer_texts(self, message: str) -> list[str] | None:
        """The messages of the ``set_callback`` timers a fired turn carries, or None
        when it carries another reminder too."""
        from ..protocol.display import fired_keys

        texts: list[str] = []
        for key in fired_keys(message):
            try:
                rem = self.chat.store.reminders.get_reminder(key.split("@", 1)[0])
            except Exception:
                return None
            if rem.source != "callback":
                return None
            texts.append(rem.text)
        return texts or None


PROMPT = "you> "


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def run_demo_command(args: argparse.Namespace, out: TextIO) -> int:
    from ..chats.demo import run_demo

    alerter = None if args.no_alerts else "local"
    return run_demo(out, db_url=args.db, delay_s=args.delay, alerter=alerter)


__all__ = ["add_parsers", "run_chat", "run_demo_command"]
