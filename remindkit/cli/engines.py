"""``remindkit serve`` and ``remindkit tray``: an engine in the foreground."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

from .context import Context, emit_json

if TYPE_CHECKING:
    from ..wiring import Graph
    from .handoff import HandoffServer


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    sv = sub.add_parser("serve", parents=[common], help="run an engine until SIGINT/SIGTERM")
    sv.add_argument("--no-alerts", action="store_true", help="never play alarms or speech here")
    sv.add_argument("-v", "--verbose", action="store_true")
    sv.set_defaults(func=serve_command)
    tr = sub.add_parser(
        "tray",
        parents=[common],
        help="the tray app (alarms, speech, menu); headless without a display",
    )
    tr.add_argument(
        "--headless", action="store_true", help="no icon: the engine and its alerts only"
    )
    tr.add_argument("-v", "--verbose", action="store_true")
    tr.set_defaults(func=tray_command)


def serve_command(cx: Context) -> int:
    with serving_commands(cx.graph):  # `remindkit remind …` and the like run in this process
        return serve(
            cx.graph,
            cx.out,
            no_alerts=cx.args.no_alerts,
            verbose=cx.args.verbose,
            as_json=cx.args.json,
        )


def tray_command(cx: Context) -> int:
    from ..tray.app import run_tray

    with serving_commands(cx.graph):
        return run_tray(cx.graph, cx.out, headless=cx.args.headless, verbose=cx.args.verbose)


def serve(
    graph: Graph,
    out: TextIO,
    *,
    no_alerts: bool = False,
    verbose: bool = False,
    as_json: bool = False,
) -> int:
    """Run an engine in the foreground until SIGINT or SIGTERM."""
    import faulthandler
    import logging
    import signal
    import threading

    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    engine = graph.engine(alerter=None if no_alerts else "local", role="serve")
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()
        engine.poke()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    if hasattr(
        signal, "SIGUSR1"
    ):  # `kill -USR1 PID`: every thread's stack on stderr (a stuck engine)
        faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)
    if as_json:
        emit_json(out, {"serving": engine.id, "store": graph.store.url})
    else:
        out.write(f"remindkit serve: engine {engine.id} on {graph.store.url}; stop with Ctrl-C\n")
    out.flush()
    engine.run(stop)
    if as_json:
        emit_json(out, {"stopped": engine.id})
    else:
        out.write("remindkit serve: stopped\n")
    return 0


@contextlib.contextmanager
def serving_commands(graph: Graph) -> Iterator[HandoffServer | None]:
    """Serve handed-over commands (:mod:`remindkit.cli.handoff`) for ``graph``'s store
    while the block runs (not with ``REMINDKIT_HANDOFF=0``)."""
    if os.environ.get("REMINDKIT_HANDOFF", "1") == "0":
        yield None
        return
    from .handoff import HandoffServer
    from .main import main  # the engine's process has it loaded already

    server = HandoffServer(graph, main).start()
    try:
        yield server
    finally:
        server.close()
