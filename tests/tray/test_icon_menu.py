"""The icon's pixels and the menu's structure and actions (no display needed:
the menu is built with stand-in Menu/MenuItem classes that mirror pystray's)."""

from __future__ import annotations

from typing import Any

from PIL import Image

from remindkit.tray.icon import BADGE, BADGE_FAILED, BELL, BELL_PAUSED, Badge, draw_icon
from remindkit.tray.menu import Actions, build_menu, top_labels
from remindkit.tray.view import Entry, View


def near(a: tuple, b: tuple, tol: int = 40) -> bool:
    return all(abs(x - y) <= tol for x, y in zip(a[:3], b[:3], strict=True))


def test_bell_and_badge_colours_follow_the_state() -> None:
    normal = draw_icon(Badge(2), 64)
    assert isinstance(normal, Image.Image) and normal.size == (64, 64)
    bell_px = normal.getpixel((20, 36))  # the bell's body, left of the badge
    badge_px = normal.getpixel((56, 8))  # inside the badge disc
    assert near(bell_px, BELL) and near(badge_px, BADGE)
    assert near(draw_icon(Badge(2, paused=True), 64).getpixel((16, 36)), BELL_PAUSED)
    assert near(draw_icon(Badge(1, failed=True), 64).getpixel((56, 8)), BADGE_FAILED)
    assert draw_icon(Badge(0), 64).getpixel((56, 8))[3] == 0  # no badge: transparent there
    assert (
        draw_icon(Badge(3), 64).tobytes() != draw_icon(Badge(4), 64).tobytes()
    )  # the count is drawn
    assert draw_icon(Badge(3), 64).tobytes() == draw_icon(Badge(3), 64).tobytes()


class FakeItem:
    def __init__(self, text: str, action: Any, checked: Any = None, enabled: bool = True) -> None:
        self.text, self.action, self.enabled = text, action, enabled
        self.checked = checked(self) if callable(checked) else checked

    @property
    def submenu(self) -> FakeMenu | None:
        return self.action if isinstance(self.action, FakeMenu) else None

    def click(self) -> None:
        self.action(None, self)


class FakeMenu:
    SEPARATOR = object()

    def __init__(self, *items: Any) -> None:
        self.items = list(items)

    def labels(self) -> list[str | None]:
        return [None if i is FakeMenu.SEPARATOR else i.text for i in self.items]

    def find(self, text: str) -> FakeItem:
        return next(i for i in self.items if i is not FakeMenu.SEPARATOR and i.text == text)


def view(**kw: Any) -> View:
    base = dict(
        tooltip="2 active · next: deploy in 4:59",
        badge=Badge(2),
        fires=("09:00:00 x — delivered",),
        entries=(
            Entry("rem_a", "deploy", "deploy — in 4:59", False),
            Entry("rem_b", "held", "held — paused", True),
        ),
        paused_all=False,
        muted=True,
        sounding=False,
        failed=0,
    )
    base.update(kw)
    return View(**base)  # type: ignore[arg-type]


def test_menu_lists_reminders_and_every_action_reaches_the_api() -> None:
    calls: list[tuple] = []
    actions = Actions(
        snooze=lambda rid, d: calls.append(("snooze", rid, d)),
        cancel=lambda rid: calls.append(("cancel", rid)),
        resume=lambda rid: calls.append(("resume", rid)),
        pause_all=lambda: calls.append(("pause_all",)),
        resume_all=lambda: calls.append(("resume_all",)),
        set_muted=lambda m: calls.append(("mute", m)),
        stop_sound=lambda: calls.append(("stop",)),
        quit=lambda: calls.append(("quit",)),
    )
    v = view()
    menu = build_menu(FakeMenu, FakeItem, v, actions)
    assert menu.labels() == top_labels(v)
    assert menu.items[0].enabled is False
    deploy = menu.find("deploy — in 4:59").submenu
    assert deploy is not None and deploy.labels() == ["Snooze 10m", "Snooze 1h", "Cancel"]
    deploy.find("Snooze 1h").click()
    deploy.find("Cancel").click()
    held = menu.find("held — paused").submenu
    assert held is not None and held.labels() == ["Resume", "Cancel"]
    held.find("Resume").click()
    menu.find("Pause all").click()
    mute = menu.find("Mute")
    assert mute.checked is True
    mute.click()
    assert menu.find("Stop sound").enabled is False
    menu.find("Quit").click()
    assert calls == [
        ("snooze", "rem_a", "1h"),
        ("cancel", "rem_a"),
        ("resume", "rem_b"),
        ("pause_all",),
        ("mute", False),
        ("quit",),
    ]
    fires = menu.find("Recent fires").submenu
    assert fires is not None and fires.labels() == ["09:00:00 x — delivered"]
    paused = build_menu(
        FakeMenu, FakeItem, view(paused_all=True, sounding=True, entries=(), fires=()), actions
    )
    assert "Resume all" in paused.labels() and "No reminders" in paused.labels()
    assert paused.find("Stop sound").enabled is True
    assert paused.find("Recent fires").submenu.labels() == ["No fires yet"]  # type: ignore[union-attr]


def test_top_labels_mark_separators() -> None:
    labels = top_labels(view())
    assert labels[1] is None and labels[-1] == "Quit" and labels.count(None) == 4
