"""The MCP server (``remindkit mcp``): the reminder tools for any MCP host, and
fires pushed back into a Claude Code session as channel events.

:mod:`.server` needs the ``mcp`` extra (the official MCP Python SDK) and is
imported only when a server runs; :mod:`.identity` (which session a server
speaks for) and :mod:`.install` (host configuration) need nothing beyond
remindkit.
"""
