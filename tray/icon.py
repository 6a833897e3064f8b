"""The tray icon, drawn with Pillow: a bell with a badge of the active count.

The bell is dark when reminders run, grey with a pause sign when everything is
paused; the badge is red with the count, or amber with ``!`` when a delivery
failed; a muted tray crosses the bell's sound waves out. Pure: same input, same
pixels (tests compare them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BELL = (40, 44, 52, 255)
BELL_PAUSED = (150, 150, 150, 255)
BADGE = (215, 38, 38, 255)
BADGE_FAILED = (240, 160, 0, 255)
WHITE = (255, 255, 255, 255)


@dataclass(frozen=True)
class Badge:
    """What the icon shows; the app redraws only when this changes."""

    count: int
    paused: bool = False
    failed: bool = False
    muted: bool = False


def draw_icon(badge: Badge, size: int = 64) -> Any:
    from PIL import Image, ImageDraw

    scale = 4  # draw large, then shrink: smooth edges without antialiasing support
    s = size * scale
    img = Image.new("RGBA", (s, s), (0, 0, 0, 0))
    d = ImageDraw.Draw(img)
    color = BELL_PAUSED if badge.paused else BELL
    u = s / 64.0

    def box(x0: float, y0: float, x1: float, y1: float) -> list[float]:
        return [x0 * u, y0 * u, x1 * u, y1 * u]

    d.ellipse(box(28, 4, 36, 12), fill=color)  # the knob
    d.pieslice(box(12, 8, 52, 48), 180, 360, fill=color)  # the dome
    d.rectangle(box(12, 28, 52, 46), fill=color)  # the waist
    d.polygon(
        [(6 * u, 52 * u), (12 * u, 44 * u), (52 * u, 44 * u), (58 * u, 52 * u)], fill=color
    )  # the lip
    d.ellipse(box(26, 50, 38, 62), fill=color)  # the clapper
    if badge.paused:
        d.rectangle(box(20, 28, 26, 44), fill=WHITE)
        d.rectangle(box(31, 28, 37, 44), fill=WHITE)
    if badge.muted:
        d.line([(8 * u, 6 * u), (58 * u, 58 * u)], fill=WHITE, width=int(7 * u))
        d.line([(8 * u, 6 * u), (58 * u, 58 * u)], fill=BADGE, width=int(4 * u))
    if badge.count > 0 or badge.failed:
        text = "!" if badge.failed else (str(badge.count) if badge.count < 100 else "99")
        d.ellipse(
            box(30, 0, 64, 34),
            fill=BADGE_FAILED if badge.failed else BADGE,
            outline=WHITE,
            width=int(2 * u),
        )
        _centered_text(d, text, (47 * u, 17 * u), int(24 * u))
    return img.resize((size, size), Image.Resampling.LANCZOS)


def _centered_text(d: Any, text: str, center: tuple[float, float], px: int) -> None:
    from PIL import ImageFont

    try:
        font = ImageFont.load_default(size=px)
    except TypeError:  # Pillow < 10.1 has no sized default font
        font = ImageFont.load_default()
    d.text(center, text, fill=WHITE, font=font, anchor="mm")
