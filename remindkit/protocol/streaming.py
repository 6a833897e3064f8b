"""A reply's display text while it is being written (pure).

A model streams its reply in pieces; what a person may see of it is the reply
without its ``<schedule>`` tags (:func:`~remindkit.protocol.tags.strip_tags`). A
piece can end inside a tag, or between a ``<schedule …>`` and its
``</schedule>``, where the text is the reminder's, not the reply's: that part is
held back until the tag is complete. :class:`DisplayStream` turns the pieces into
what to add to the text shown so far, or, when stripping a completed tag changed
text already shown, the whole text to show instead::

    >>> d = DisplayStream()
    >>> d.feed("Sure. <sched"), d.feed('ule label="a" delay="5m">stretch</schedule> Done.')
    (('append', 'Sure. '), ('append', ' Done.'))
"""

from __future__ import annotations

from .tags import strip_tags

_OPENERS = ("<schedule", "<cancel-schedule")
_NAME_END = frozenset(" \t\r\n/>")


def hold_from(raw: str) -> int:
    """Where the part of ``raw`` that may still become (or is inside) a tag begins;
    ``len(raw)`` when all of it can be shown."""
    pos = raw.find("<")
    while pos >= 0:
        rest = raw[pos:]
        low = rest[:20].lower()
        for opener in _OPENERS:
            if len(low) < len(opener) + 1 and opener.startswith(low):
                return pos  # the tag's name is not all there yet
            if low.startswith(opener) and low[len(opener)] in _NAME_END:
                end = rest.find(">")
                if end < 0:
                    return pos  # its attributes are still coming
                closed = rest[end - 1] == "/" or opener != "<schedule"
                if not closed and rest.lower().find("</schedule>", end) < 0:
                    return pos  # the reminder's text, up to </schedule>
                break
        pos = raw.find("<", pos + 1)
    return len(raw)


class DisplayStream:
    """The display text of a reply fed in pieces."""

    def __init__(self) -> None:
        self.raw = ""
        self.shown = ""

    def feed(self, piece: str) -> tuple[str, str] | None:
        """``("append", text)``, ``("replace", whole)`` or None (nothing new to show)."""
        self.raw += piece
        visible = strip_tags(self.raw[: hold_from(self.raw)])
        if visible == self.shown:
            return None
        if visible.startswith(self.shown):
            added, self.shown = visible[len(self.shown) :], visible
            return ("append", added)
        self.shown = visible
        return ("replace", visible)


__all__ = ["DisplayStream", "hold_from"]
