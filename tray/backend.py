"""Choosing the tray toolkit, and looking into a GTK menu.

pystray picks its backend once, when it is imported, from ``PYSTRAY_BACKEND``
or by trying appindicator, gtk, then xorg, and it silently ends on xorg (no
menu) when PyGObject is missing. Here the choice is explicit: a backend named
in ``PYSTRAY_BACKEND`` is the only one tried; otherwise appindicator → gtk →
xorg on Linux and the BSDs, darwin on macOS, win32 on Windows. With no display
at all nothing is imported (``import pystray`` raises ``DisplayNameError``
there) and :class:`TrayUnavailable` says why, so the app can run headless.

The GTK helpers read and relabel the menu that pystray built (its private
``_menu_handle``), only from the GLib main loop (:func:`on_ui`).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from remindkit.errors import TrayUnavailable

GTK_BACKENDS = ("appindicator", "gtk")


@dataclass(frozen=True)
class Backend:
    name: str
    icon_cls: Any
    menu_cls: Any
    item_cls: Any

    @property
    def has_menu(self) -> bool:
        return bool(getattr(self.icon_cls, "HAS_MENU", False))

    @property
    def gtk(self) -> bool:
        return self.name in GTK_BACKENDS


def display_problem(env: Mapping[str, str], platform: str = sys.platform) -> str | None:
    """Why no tray can be shown here, or None."""
    if platform in ("darwin", "win32") or platform.startswith("win"):
        return None
    if not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"):
        return "no display (DISPLAY and WAYLAND_DISPLAY are not set)"
    return None


def backend_order(env: Mapping[str, str], platform: str = sys.platform) -> tuple[str, ...]:
    forced = env.get("PYSTRAY_BACKEND", "").strip()
    if forced:
        return (forced,)
    if platform == "darwin":
        return ("darwin",)
    if platform.startswith("win"):
        return ("win32",)
    if not env.get("DISPLAY"):  # Wayland only: StatusNotifier through appindicator
        return ("appindicator",)
    return ("appindicator", "gtk", "xorg")


def load_backend(env: Mapping[str, str] | None = None, platform: str = sys.platform) -> Backend:
    """Import pystray with the first backend that loads; raises TrayUnavailable."""
    env = os.environ if env is None else env
    problem = display_problem(env, platform)
    if problem:
        raise TrayUnavailable(problem)
    reasons = []
    for name in backend_order(env, platform):
        _forget_pystray()
        os.environ["PYSTRAY_BACKEND"] = name  # pystray reads it when imported
        try:
            pystray = importlib.import_module("pystray")
        except Exception as exc:  # ImportError, gi's ValueError, Xlib's DisplayNameError
            reasons.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        return Backend(name, pystray.Icon, pystray.Menu, pystray.MenuItem)
    raise TrayUnavailable("no tray backend works here (" + "; ".join(reasons) + ")")


def _forget_pystray() -> None:
    for mod in [m for m in sys.modules if m == "pystray" or m.startswith("pystray.")]:
        del sys.modules[mod]


# -- GTK: the live menu -------------------------------------------------------------------


def on_ui(fn: Callable[[], Any]) -> None:
    """Run ``fn`` once on the GLib main loop (GTK backends)."""
    from gi.repository import GLib

    def once() -> bool:
        fn()
        return False

    GLib.idle_add(once)


def gtk_menu(icon: Any) -> Any:
    return getattr(icon, "_menu_handle", None)


def menu_is_open(handle: Any) -> bool:
    return bool(handle is not None and handle.get_visible())


def menu_labels(handle: Any) -> list[str | None]:
    """The labels of a Gtk.Menu's items in order (None for a separator)."""
    from gi.repository import Gtk

    if handle is None:
        return []
    return [
        None if isinstance(c, Gtk.SeparatorMenuItem) else c.get_label()
        for c in handle.get_children()
    ]


def submenu_labels(handle: Any, index: int) -> list[str | None]:
    children = handle.get_children() if handle is not None else []
    if index >= len(children) or children[index].get_submenu() is None:
        return []
    return menu_labels(children[index].get_submenu())


def relabel(handle: Any, labels: list[str | None]) -> bool:
    """Set new texts on an open menu whose shape is unchanged; False if the shape differs."""
    current = menu_labels(handle)
    if len(current) != len(labels) or any(
        (a is None) != (b is None) for a, b in zip(current, labels, strict=True)
    ):
        return False
    for child, old, new in zip(handle.get_children(), current, labels, strict=True):
        if new is not None and old != new:
            child.set_label(new)
    return True
