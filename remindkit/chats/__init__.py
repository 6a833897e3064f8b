"""Chats in this process: :class:`ChatSession` (a conversation with a model that
reminders come back to, used by ``remindkit chat`` and ``rk.chat``) and
``remindkit demo`` (:func:`~remindkit.chats.demo.run_demo`, the whole loop with a
scripted model). A surface: it runs on a graph from :func:`remindkit.build`."""

from .session import ChatSession, Entry, display_entries

__all__ = ["ChatSession", "Entry", "display_entries"]
