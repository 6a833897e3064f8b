"""How ``remindkit api`` sets up uvicorn."""

from __future__ import annotations

import importlib.util

from remindkit.api.server import http_parser


def test_the_c_parser_is_used_when_installed_else_h11(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: object() if name == "httptools" else real(name, *a),
    )
    assert http_parser() == "httptools"
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "httptools" else real(name, *a),
    )
    assert http_parser() == "h11"
