"""``remindkit telegram``: a Telegram bot bridging chats and forum topics to
agent sessions (python-telegram-bot; the ``telegram`` extra). See
:mod:`remindkit.channels.telegram.bot`."""
