"""``remindkit chat`` and ``remindkit demo``.

``remindkit chat --base-url URL --model NAME [--session ID]``: a terminal chat
with an OpenAI-compatible endpoint, kept in the store as an ``openai`` session.
An engine runs in the process, so reminders the agent sets fire here; a fired
reminder arrives as a new turn while you are idle and shows as a short marker
and the agent's reply. ``/reminders`` lists the session's reminders, ``/quit``
(or end of input) leaves.
"""

from __future__ import annotations

import argparse
import threading
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
    view.interactive = _is_tty(inp)
    out.write(
        f"remindkit chat: {args.model} at {args.base_url}, session {chat.id}. "
        "Reminders come back here while you are idle. /reminders lists them, /quit leaves.\n"
    )
    out.flush()
    if engine is not None:
        engine.start()
    view.start()
    try:
        while True:
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
            view.send(text)
    finally:
        view.stop()
        chat.close()
        if engine is not None:
            engine.stop()
            engine.close()
    return 0


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

    def _poll(self) -> None:
        while not self._stop.wait(0.2):
            try:
                with self.lock:
                    if not self._own_turn:
                        self._drain()
            except Exception:  # the store may be briefly unavailable; try again
                continue

    def _drain(self) -> None:
        out: list[str] = []
        for entry in self.chat.entries(after_seq=self.seen):
            self.seen = max(self.seen, entry.seq)
            if entry.who == "fired":
                out.append(inert(entry.text))
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
