"""The alarm sound: play a WAV file, bounded in time, stoppable from any thread.

Players are tried in order (:func:`~remindkit.alerts.config.default_players`):
simpleaudio in this process, then the system's players (``paplay``,
``pw-play``, ``aplay``; ``afplay`` on macOS; ``winsound`` on Windows). A player
that is missing, or fails at once (no sound device: simpleaudio raises, ``aplay``
exits non-zero), hands over to the next; when none plays, the result says
"audio unavailable" with each player's reason, and the caller logs it. Nothing
here raises.

One deadline covers all attempts, so a hung player costs at most the timeout:
it is stopped (a subprocess is killed with its process group) and the result
is a failure. :meth:`AlarmPlayer.stop` ends whatever is playing now (the tray's
"Stop sound" and the notification's Dismiss call it).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import wave
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .config import default_players

log = logging.getLogger(__name__)
_POLL_S = 0.02

SYSTEM_PLAYERS: dict[str, tuple[str, ...]] = {
    "paplay": ("paplay",),
    "pw-play": ("pw-play",),
    "aplay": ("aplay", "-q"),
    "afplay": ("afplay",),
}


@dataclass(frozen=True)
class PlayResult:
    """How playing went: ``ok`` with the player that played it, or why not."""

    ok: bool
    player: str | None = None
    error: str | None = None
    stopped: bool = False
    timed_out: bool = False
    tried: tuple[str, ...] = field(default=())


class _Failed(Exception):
    """This player cannot play here (missing, no device); try the next one."""


class AlarmPlayer:
    def __init__(
        self,
        players: Sequence[str] | None = None,
        *,
        timeout_s: float = 15.0,
        which: Callable[[str], str | None] = shutil.which,
    ) -> None:
        self.players = tuple(players if players is not None else default_players())
        self.timeout_s = timeout_s
        self.which = which
        self._lock = threading.Lock()  # one sound at a time
        self._stop = threading.Event()

    def play(self, path: str | Path, *, timeout_s: float | None = None) -> PlayResult:
        """Play ``path`` to the end (or until stopped or the timeout); never raises."""
        path = Path(path)
        if not path.is_file():
            return PlayResult(False, error=f"no sound file at {path}")
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        with self._lock:
            self._stop.clear()
            reasons: list[str] = []
            tried: list[str] = []
            for name in self.players:
                if time.monotonic() >= deadline:
                    break
                tried.append(name)
                try:
                    outcome = self._play_with(name, path, deadline)
                except _Failed as exc:
                    reasons.append(f"{name}: {exc}")
                    continue
                except Exception as exc:  # a player's bug must not reach the engine
                    reasons.append(f"{name}: {type(exc).__name__}: {exc}")
                    continue
                if outcome == "timeout":
                    return PlayResult(
                        False,
                        player=name,
                        error=f"{name} did not finish in time; stopped",
                        timed_out=True,
                        tried=tuple(tried),
                    )
                return PlayResult(
                    True, player=name, stopped=outcome == "stopped", tried=tuple(tried)
                )
            why = "; ".join(reasons) or "no player configured"
            return PlayResult(False, error=f"audio unavailable ({why})", tried=tuple(tried))

    def stop(self) -> None:
        """End the sound playing now, if any (from any thread)."""
        self._stop.set()

    @property
    def playing(self) -> bool:
        return self._lock.locked()

    # -- players -------------------------------------------------------------------------

    def _play_with(self, name: str, path: Path, deadline: float) -> str:
        if name == "simpleaudio":
            return self._simpleaudio(path, deadline)
        if name == "winsound":
            return self._winsound(path, deadline)
        argv = SYSTEM_PLAYERS.get(name)
        if argv is None:
            raise _Failed("unknown player")
        exe = self.which(argv[0])
        if exe is None:
            raise _Failed("not installed")
        return self._subprocess([exe, *argv[1:], str(path)], deadline)

    def _simpleaudio(self, path: Path, deadline: float) -> str:
        try:
            import simpleaudio
        except Exception as exc:  # ImportError, or a broken build
            raise _Failed(f"not available ({type(exc).__name__}: {exc})") from None
        try:
            with (
                quiet_stderr()
            ):  # ALSA's C library prints its own "ALSA lib … Unknown PCM default" on fd 2
                play = simpleaudio.WaveObject.from_wave_file(str(path)).play()
        except Exception as exc:  # SimpleaudioError: no device
            raise _Failed(str(exc).strip()) from None
        while play.is_playing():
            if self._stop.wait(_POLL_S):
                play.stop()
                return "stopped"
            if time.monotonic() >= deadline:
                play.stop()
                return "timeout"
        return "done"

    def _subprocess(self, argv: list[str], deadline: float) -> str:
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=os.name == "posix",
            )
        except OSError as exc:
            raise _Failed(exc.strerror or str(exc)) from None
        assert proc.stderr is not None
        with proc.stderr:
            outcome = _wait(proc, deadline, self._stop)
            if outcome != "done":
                return outcome
            err = proc.stderr.read().decode(errors="replace").strip()
        if proc.returncode != 0:
            raise _Failed(
                f"exit {proc.returncode}: {err.splitlines()[-1] if err else 'no message'}"
            )
        return "done"

    def _winsound(self, path: Path, deadline: float) -> str:
        if not sys.platform.startswith("win"):
            raise _Failed("only on Windows")
        import winsound

        seconds = wav_duration(path)
        winsound.PlaySound(str(path), winsound.SND_FILENAME | winsound.SND_ASYNC)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self._stop.wait(_POLL_S) or time.monotonic() >= deadline:
                winsound.PlaySound(None, winsound.SND_PURGE)
                return "stopped" if self._stop.is_set() else "timeout"
        return "done"


def _wait(proc: subprocess.Popen[bytes], deadline: float, stop: threading.Event) -> str:
    """Wait for ``proc``; kill it (and its children) when stopped or past the deadline."""
    while proc.poll() is None:
        if stop.wait(_POLL_S):
            kill_tree(proc)
            return "stopped"
        if time.monotonic() >= deadline:
            kill_tree(proc)
            return "timeout"
    return "done"


_FD2_LOCK = threading.Lock()


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """File descriptor 2 points at /dev/null inside the block (C libraries that
    print to stderr themselves, such as ALSA, cannot be silenced otherwise)."""
    with _FD2_LOCK:
        try:
            saved = os.dup(2)
        except OSError:  # no stderr at all: nothing to keep quiet
            yield
            return
        try:
            with open(os.devnull, "wb") as null:
                sys.stderr.flush()
                os.dup2(null.fileno(), 2)
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """Kill a child started with ``start_new_session`` together with its children."""
    if proc.poll() is not None:
        return
    if os.name == "posix":
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def wav_duration(path: str | Path) -> float:
    with wave.open(str(path), "rb") as w:
        return w.getnframes() / float(w.getframerate())
