#!/usr/bin/env python3
"""Make remindkit's alarm sound: ``remindkit/assets/alarm.wav``.

A soft three-note chime (C6, E6, G6, then the C7 octave), played twice: sine
partials with a short attack and an exponential decay, so it is clear without
being harsh. Pure arithmetic from this file, no samples from anywhere else, so
the sound is as free as the code (MIT). The output is byte-for-byte the same on
every run (16-bit PCM, mono, 22,050 Hz; ``wave`` can read it, simpleaudio and
``aplay`` can play it), and a test checks that the committed file is what this
script makes.

    python scripts/make_alarm.py [OUT]
"""

from __future__ import annotations

import math
import struct
import sys
import wave
from pathlib import Path

RATE = 22_050
NOTES = ((1046.50, 0.00), (1318.51, 0.16), (1567.98, 0.32), (2093.00, 0.48))  # Hz, start s
ROUND_S = 1.10  # one chime
ROUNDS = 2
NOTE_S = 0.62
PEAK = 0.42  # of full scale, after mixing


def chime_samples() -> list[float]:
    total = int(RATE * ROUND_S * ROUNDS)
    out = [0.0] * total
    for r in range(ROUNDS):
        for freq, start in NOTES:
            first = int(RATE * (r * ROUND_S + start))
            for i in range(int(RATE * NOTE_S)):
                t = i / RATE
                attack = min(1.0, t / 0.008)
                env = attack * math.exp(-t * 6.5)
                tone = (math.sin(2 * math.pi * freq * t)
                        + 0.35 * math.sin(2 * math.pi * 2 * freq * t) * math.exp(-t * 9.0)
                        + 0.12 * math.sin(2 * math.pi * 3 * freq * t) * math.exp(-t * 14.0))
                if first + i < total:
                    out[first + i] += env * tone
    fade = int(RATE * 0.05)  # no click at the end
    for i in range(fade):
        out[total - 1 - i] *= i / fade
    peak = max(abs(x) for x in out) or 1.0
    return [x / peak * PEAK for x in out]


def write_wav(path: Path, samples: list[float]) -> None:
    frames = b"".join(struct.pack("<h", max(-32767, min(32767, round(x * 32767)))) for x in samples)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(frames)


def main(argv: list[str]) -> int:
    default = Path(__file__).resolve().parent.parent / "remindkit" / "assets" / "alarm.wav"
    out = Path(argv[1]) if len(argv) > 1 else default
    write_wav(out, chime_samples())
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
