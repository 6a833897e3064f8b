"""One utterance in a fresh process: ``python -m remindkit.alerts.speak_worker``.

pyttsx3 (2.99) keeps one engine per driver in a process, is not safe across
threads, can hang in ``runAndWait``, and after one ``save_to_file`` keeps
writing later utterances to that file. So the speaker starts this worker once
per utterance, reads the text from stdin, and kills the worker at its timeout.

Its espeak driver synthesises on espeak's own thread (``AUDIO_OUTPUT_RETRIEVAL``
is asynchronous) and ``runAndWait`` can return before that thread has written
the WAV, so the worker waits for the ``finished-utterance`` notification.

    --out FILE   render to a WAV file (Linux: the caller plays it, so a missing
                 sound device is seen) instead of speaking aloud
    --voice V    a voice id, name or language (``en``, ``en-us``, ``English``)
    --rate N     words per minute

Exit status: 0 spoken or rendered, 2 pyttsx3 is missing, 1 anything else.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from typing import Any

FINISH_WAIT_S = 60.0  # the caller's deadline kills the worker long before this


def pick_voice(voices: list[Any], wanted: str) -> str | None:
    """The id of the voice that best matches ``wanted`` (id, name, or language)."""
    w = wanted.strip().lower()
    for test in (
        lambda v: v.id.lower() == w,
        lambda v: (v.name or "").lower() == w,
        lambda v: v.id.lower().rsplit("/", 1)[-1] == w,
        lambda v: any(str(lang).lower().lstrip("\x05") == w for lang in (v.languages or [])),
        lambda v: w in (v.name or "").lower(),
    ):
        for v in voices:
            try:
                if test(v):
                    return str(v.id)
            except Exception:
                continue
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="remindkit-speak-worker")
    p.add_argument("--out")
    p.add_argument("--voice")
    p.add_argument("--rate", type=int)
    args = p.parse_args(argv)
    text = sys.stdin.read().strip()
    if not text:
        return 1
    try:
        import pyttsx3
    except ImportError:
        print("pyttsx3 is not installed", file=sys.stderr)
        return 2
    engine = pyttsx3.init()
    finished = threading.Event()
    errors: list[str] = []

    def on_error(name: object = None, exception: BaseException | None = None) -> None:
        errors.append(repr(exception))
        finished.set()

    engine.connect("finished-utterance", lambda **_kw: finished.set())
    engine.connect("error", on_error)
    if args.voice:
        vid = pick_voice(list(engine.getProperty("voices") or []), args.voice)
        if vid is not None:
            engine.setProperty("voice", vid)
        else:
            print(f"no voice matches {args.voice!r}; using the default", file=sys.stderr)
    if args.rate:
        engine.setProperty("rate", args.rate)
    if args.out:
        engine.save_to_file(text, args.out)
    else:
        engine.say(text)
    engine.runAndWait()
    finished.wait(FINISH_WAIT_S)
    if errors:
        print("pyttsx3 failed: " + "; ".join(errors), file=sys.stderr)
        return 1
    if args.out and not (os.path.isfile(args.out) and os.path.getsize(args.out) > 44):
        print("pyttsx3 wrote no audio", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.stdout = sys.stderr  # pyttsx3 prints "Audio saved to ..."; keep stdout clean
    raise SystemExit(main())
