"""Channels: remindkit sessions that live in a remote service.

* :mod:`~remindkit.store.outbox`: the stored outbox every outgoing message goes
  through (written before it is sent, marked after the answer, retried with
  back-off, one row per reply);
* :mod:`~remindkit.sessions.routed`: the ``telegram`` session adapter, which runs the
  agent bound to a chat thread and puts its reply in the outbox for that route
  (any engine can run it; the bot sends);
* :mod:`~remindkit.sessions.webhook`: the ``webhook`` session adapter (Standard
  Webhooks signatures);
* :mod:`~remindkit.channels.telegram`: ``remindkit telegram``, the bot
  (python-telegram-bot, an optional extra, imported only there).
"""
