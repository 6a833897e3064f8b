"""remindkit in Jupyter: a chat whose reminders come back to it, and a widget
panel with live countdown pills.

>>> import remindkit as rk                                                   # doctest: +SKIP
>>> chat = rk.chat(base_url="http://127.0.0.1:11434/v1", model="llama3.2")   # doctest: +SKIP
>>> rk.panel(chat)                                                           # doctest: +SKIP

Modules, one per concept:

* ``session``: :func:`chat` (a ChatSession with this kernel's engine) and :func:`wait_for`;
* ``runtime``: the kernel's engine, browser alerter and hub per store, started once;
* ``hub``: the one thread that writes widget state (wake-up hints, 1 s refresh);
* ``state``: pure: pills, countdown text, chat lines with fired markers;
* ``pills``, ``form``, ``chatview``, ``panels``: the widgets (need the
  ``notebook`` extra: ipywidgets and anywidget);
* ``alerts``: the browser alerter and the alarm sound;
* ``scripted``: scripted local models so the notebooks run offline.

Widget classes load on first use, so ``chat`` works without ipywidgets.
"""

from __future__ import annotations

import importlib
from typing import Any

from .runtime import KernelRuntime, runtime_for
from .session import chat, wait_for

_LAZY = {
    "Panel": "panels",
    "panel": "panels",
    "PillsWidget": "pills",
    "ReminderForm": "form",
    "ChatView": "chatview",
    "BrowserAlerter": "alerts",
    "ScriptedAssistant": "scripted",
    "ScriptedPoller": "scripted",
}
WIDGETS_MISSING = (
    "remindkit's notebook widgets need ipywidgets and anywidget: pip install 'remindkit[notebook]'"
)


def require_widgets() -> None:
    """Raise ImportError with the install hint when the widget toolkits are missing."""
    for name in ("ipywidgets", "anywidget"):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ImportError(f"{WIDGETS_MISSING} (cannot import {name})", name=name) from exc


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if module != "scripted":
        require_widgets()
    return getattr(importlib.import_module(f".{module}", __name__), name)


__all__ = ["KernelRuntime", "chat", "require_widgets", "runtime_for", "wait_for", *_LAZY]
