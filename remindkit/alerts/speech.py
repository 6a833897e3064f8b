"""Speaking the ``announce`` text: one fresh worker process per utterance.

Engines are tried in order, all under one deadline:

* ``pyttsx3`` in :mod:`remindkit.alerts.speak_worker`, a new process each
  time (never a shared engine: see that module for why). On Linux the worker
  renders a WAV and this module plays it through the
  :class:`~remindkit.alerts.alarm.AlarmPlayer`, so a missing sound device is
  seen (pyttsx3's own playback hides it); elsewhere the worker speaks aloud.
* ``espeak-ng`` (``-w`` to a WAV, then played the same way) on Linux,
  ``say`` on macOS.

A worker that hangs is killed (with its process group) when the deadline
passes, and the result says so; speaking never raises and never outlasts its
timeout by more than a moment.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .alarm import AlarmPlayer, kill_tree

log = logging.getLogger(__name__)


def default_engines(platform: str = sys.platform) -> tuple[str, ...]:
    if platform == "darwin":
        return ("pyttsx3", "say")
    if platform.startswith("win"):
        return ("pyttsx3",)
    return ("pyttsx3", "espeak-ng")


@dataclass(frozen=True)
class SpeechResult:
    ok: bool
    engine: str | None = None
    error: str | None = None
    timed_out: bool = False
    stopped: bool = False


class _Failed(Exception):
    pass


class _TimedOut(Exception):
    pass


class Speaker:
    def __init__(
        self,
        player: AlarmPlayer | None = None,
        *,
        engines: Sequence[str] | None = None,
        worker_argv: Sequence[str] | None = None,
        timeout_s: float = 20.0,
        render_to_file: bool | None = None,
        which: Callable[[str], str | None] = shutil.which,
    ) -> None:
        self.player = player or AlarmPlayer()
        self.engines = tuple(engines if engines is not None else default_engines())
        self.worker_argv = tuple(
            worker_argv or (sys.executable, "-m", "remindkit.alerts.speak_worker")
        )
        self.timeout_s = timeout_s
        self.render_to_file = (
            sys.platform.startswith("linux") if render_to_file is None else render_to_file
        )
        self.which = which
        self._stop = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None

    # -- speaking ------------------------------------------------------------------------

    def say(
        self,
        text: str,
        *,
        voice: str | None = None,
        rate: int | None = None,
        timeout_s: float | None = None,
    ) -> SpeechResult:
        """Speak ``text`` (bounded by the timeout); never raises."""
        self._stop.clear()
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        reasons: list[str] = []
        with tempfile.TemporaryDirectory(prefix="remindkit-speech-") as tmp:
            for n, engine in enumerate(self.engines):
                if self._stop.is_set():
                    return SpeechResult(False, engine, error="stopped", stopped=True)
                out = Path(tmp) / f"{n}.wav" if self.render_to_file else None
                try:
                    self._run(engine, text, out, voice=voice, rate=rate, deadline=deadline)
                except _Failed as exc:
                    reasons.append(f"{engine}: {exc}")
                    continue
                except _TimedOut:
                    return SpeechResult(
                        False,
                        engine,
                        error=f"{engine} did not finish in time; killed",
                        timed_out=True,
                    )
                except Exception as exc:
                    reasons.append(f"{engine}: {type(exc).__name__}: {exc}")
                    continue
                if out is None:
                    return SpeechResult(True, engine)
                played = self.player.play(out, timeout_s=max(0.1, deadline - time.monotonic()))
                if played.ok:
                    return SpeechResult(True, engine, stopped=played.stopped)
                return SpeechResult(
                    False,
                    engine,
                    error=f"rendered but not played: {played.error}",
                    timed_out=played.timed_out,
                )
        return SpeechResult(
            False, error="speech unavailable (" + ("; ".join(reasons) or "no engine") + ")"
        )

    def render(
        self,
        text: str,
        out: str | Path,
        *,
        voice: str | None = None,
        rate: int | None = None,
        timeout_s: float | None = None,
    ) -> SpeechResult:
        """Write the utterance to the WAV file ``out`` with the first engine that can."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        reasons: list[str] = []
        for engine in self.engines:
            try:
                self._run(engine, text, Path(out), voice=voice, rate=rate, deadline=deadline)
                return SpeechResult(True, engine)
            except _TimedOut:
                return SpeechResult(
                    False, engine, error=f"{engine} did not finish in time; killed", timed_out=True
                )
            except Exception as exc:
                reasons.append(f"{engine}: {exc}")
        return SpeechResult(False, error="speech unavailable (" + "; ".join(reasons) + ")")

    def stop(self) -> None:
        """Stop the utterance now: kill its worker, stop its playback."""
        self._stop.set()
        proc = self._proc
        if proc is not None:
            kill_tree(proc)
        self.player.stop()

    # -- engines -------------------------------------------------------------------------

    def _run(
        self,
        engine: str,
        text: str,
        out: Path | None,
        *,
        voice: str | None,
        rate: int | None,
        deadline: float,
    ) -> None:
        if engine == "pyttsx3":
            argv = list(self.worker_argv)
            if out is not None:
                argv += ["--out", str(out)]
            if voice:
                argv += ["--voice", voice]
            if rate:
                argv += ["--rate", str(rate)]
            self._spawn(argv, text, deadline)
        elif engine == "espeak-ng":
            exe = self.which("espeak-ng") or self.which("espeak")
            if exe is None:
                raise _Failed("not installed")
            argv = [exe, "--stdin"]
            if out is not None:
                argv += ["-w", str(out)]
            if voice:
                argv += ["-v", voice]
            if rate:
                argv += ["-s", str(rate)]
            self._spawn(argv, text, deadline)
        elif engine == "say":
            exe = self.which("say")
            if exe is None:
                raise _Failed("not installed")
            argv = [exe]
            if out is not None:
                argv += ["--data-format=LEI16@22050", "-o", str(out)]
            if voice:
                argv += ["-v", voice]
            if rate:
                argv += ["-r", str(rate)]
            self._spawn(argv, text, deadline)
        else:
            raise _Failed("unknown speech engine")
        if out is not None and not (out.is_file() and out.stat().st_size > 44):
            raise _Failed("no audio was written")

    def _spawn(self, argv: list[str], text: str, deadline: float) -> None:
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=os.name == "posix",
            )
        except OSError as exc:
            raise _Failed(exc.strerror or str(exc)) from None
        self._proc = proc
        try:
            try:
                _, err = proc.communicate(
                    text.encode("utf-8"), timeout=max(0.05, deadline - time.monotonic())
                )
            except subprocess.TimeoutExpired:
                kill_tree(proc)
                proc.communicate()
                raise _TimedOut() from None
        finally:
            self._proc = None
        if self._stop.is_set():
            raise _Failed("stopped")
        if proc.returncode != 0:
            msg = err.decode(errors="replace").strip().splitlines()
            raise _Failed(f"exit {proc.returncode}: {msg[-1] if msg else 'no message'}")
