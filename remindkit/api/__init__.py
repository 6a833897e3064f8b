"""The HTTP API (``remindkit api``): FastAPI routes over the reminders API, bearer
tokens, server-sent events and a web page. FastAPI and uvicorn (the ``api``
extra) are imported only by ``app``, ``events`` and ``server``; ``tokens`` is
plain Python, used by the ``token`` command too."""
