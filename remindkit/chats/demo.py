"""``remindkit demo``: the whole loop with no model server.

A built-in *scripted local model* (:class:`~remindkit.agent.scripted.ScriptedModel`:
not a language model, it follows a fixed script and says so) answers the first
message with a ``<schedule>`` tag a few seconds out. The reminder fires in an
engine in this process: the fired event is published, the alarm plays and the
``announce`` text is spoken where this machine can (unless ``remindkit alerts
mute`` or quiet hours say otherwise), and the hidden ``<schedule-fired>`` turn
goes back to the same conversation, where the scripted model answers it.
Everything is printed.
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from .. import events as ev
from ..agent.scripted import SCRIPT_LABEL, ScriptedModel
from ..clock import format_utc
from ..models import AlertState


def run_demo(
    out: TextIO,
    *,
    db_url: str | None = None,
    delay_s: int = 3,
    timeout_s: float = 30.0,
    alerter: Any = None,
) -> int:
    """Run the loop once; 0 when the agent answered the fired reminder. ``alerter``:
    as :meth:`remindkit.wiring.Graph.engine` takes it (``"local"``: this machine's)."""
    from ..wiring import build
    from .session import ChatSession

    tmp = None
    if db_url is None:
        tmp = tempfile.TemporaryDirectory(prefix="remindkit-demo-")
        db_url = f"sqlite:///{Path(tmp.name) / 'demo.db'}"
    graph = build(db=db_url)
    store = graph.store
    engine = graph.engine(alerter=alerter, role="demo")
    alerter = engine.alerter
    done = threading.Event()
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            out.write(line + "\n")
            out.flush()

    def on_fired(event: ev.Fired) -> None:
        fire = event.fire
        say(f"⏰ fired: {fire.label or fire.reminder_id} (due {format_utc(fire.due_at)})")

    def on_alerted(event: ev.Alerted) -> None:
        state: str = event.state
        if state == AlertState.FAILED and getattr(alerter, "no_audio", False):
            state = "not heard: there is no audio device"
        say(f"🔔 alarm and speech ({event.fire.announce!r}): {state}")

    engine.events.subscribe(ev.Fired, on_fired)
    if alerter is not None:
        engine.events.subscribe(ev.Alerted, on_alerted)
    try:
        engine.start()
        chat = ChatSession(
            graph,
            session="demo",
            model=ScriptedModel(delay_s=delay_s),
            engine=engine,
            title="remindkit demo",
        )
        say(
            f"remindkit demo: a {SCRIPT_LABEL} (no model server, no network) in session {chat.id!r}"
        )
        if alerter is None:
            say("(no alarm or speech on this machine: the reminder is shown here only)")
        question = f"Remind me in {delay_s} seconds to stretch."
        say(f"you> {question}")
        reply = chat.send(question)
        say(f"agent> {reply.text}")
        for outcome in reply.tags:
            if outcome.ok and outcome.reminder is not None:
                r = outcome.reminder
                say(f"   (reminder {r.id} '{r.label}' set for {format_utc(r.next_fire_at)})")
            elif not outcome.ok:
                say(f"   (tag not carried out: {outcome.code}: {outcome.message})")
        seen = chat.last_seq()
        say("... waiting for the reminder; the conversation is idle ...")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not done.is_set():
            for entry in chat.entries(after_seq=seen):
                seen = max(seen, entry.seq)
                if entry.who == "fired":
                    say(f"{entry.text} (a hidden <schedule-fired> turn in the same conversation)")
                elif entry.who == "agent":
                    say(f"agent> {entry.text}")
                    done.set()
            time.sleep(0.1)
        if not done.is_set():
            say(f"error: no reply to the fired reminder within {timeout_s:g}s")
            return 1
        say("demo complete: set by a tag, fired on time, answered in a new turn.")
        return 0
    finally:
        engine.stop()
        engine.close()
        store.close()
        if tmp is not None:
            tmp.cleanup()


__all__ = ["SCRIPT_LABEL", "ScriptedModel", "run_demo"]
