"""The tray menu, built from a :class:`~tray.view.View` with pystray's classes.

::

    2 active · next: deploy in 4:59        (the tooltip, greyed)
    ─────────
    deploy — in 4:59                 ▸  Snooze 10m · Snooze 1h · Cancel
    build — in 12:03                 ▸  …
    ─────────
    Pause all  (or Resume all)
    ✓ Mute
    Stop sound                       (only while a sound plays)
    ─────────
    Recent fires                     ▸  last 24h: 12 fires · 11 delivered · 1 failed · …
                                        09:00:05 deploy — delivered …
    ─────────
    Quit

:func:`top_labels` gives the top-level texts in order (None for a separator):
the app compares them to relabel an open menu in place, and the tests read them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from .view import View

SNOOZES = ("10m", "1h")


@dataclass(frozen=True)
class Actions:
    snooze: Callable[[str, str], None]
    cancel: Callable[[str], None]
    resume: Callable[[str], None]
    pause_all: Callable[[], None]
    resume_all: Callable[[], None]
    set_muted: Callable[[bool], None]
    stop_sound: Callable[[], None]
    quit: Callable[[], None]


def top_labels(view: View) -> list[str | None]:
    labels: list[str | None] = [view.header, None]
    labels += [e.text for e in view.entries] or ["No reminders"]
    labels += [
        None,
        "Resume all" if view.paused_all else "Pause all",
        "Mute",
        "Stop sound",
        None,
        "Recent fires",
        None,
        "Quit",
    ]
    return labels


def build_menu(menu_cls: Any, item_cls: Any, view: View, actions: Actions) -> Any:
    """A pystray ``Menu`` for ``view``; every action runs ``actions`` (never raises into pystray)."""
    sep = menu_cls.SEPARATOR

    def act(fn: Callable[[], None]) -> Callable[[Any, Any], None]:
        def run(_icon: Any, _item: Any) -> None:
            fn()

        return run

    items: list[Any] = [item_cls(view.header, None, enabled=False), sep]
    for e in view.entries:
        sub: list[Any] = []
        if e.paused:
            sub.append(item_cls("Resume", act(partial(actions.resume, e.id))))
        else:
            sub += [item_cls(f"Snooze {d}", act(partial(actions.snooze, e.id, d))) for d in SNOOZES]
        sub.append(item_cls("Cancel", act(partial(actions.cancel, e.id))))
        items.append(item_cls(e.text, menu_cls(*sub)))
    if not view.entries:
        items.append(item_cls("No reminders", None, enabled=False))
    items += [
        sep,
        item_cls("Resume all", act(actions.resume_all))
        if view.paused_all
        else item_cls("Pause all", act(actions.pause_all)),
        item_cls(
            "Mute", act(lambda: actions.set_muted(not view.muted)), checked=lambda _item: view.muted
        ),
        item_cls("Stop sound", act(actions.stop_sound), enabled=view.sounding),
        sep,
    ]
    recent = [item_cls(line, None, enabled=False) for line in view.fires] or [
        item_cls("No fires yet", None, enabled=False)
    ]
    if view.stats:  # the counts of `remindkit stats` above the list
        recent = [item_cls(view.stats, None, enabled=False), sep, *recent]
    items.append(item_cls("Recent fires", menu_cls(*recent)))
    items += [sep, item_cls("Quit", act(actions.quit))]
    return menu_cls(*items)
