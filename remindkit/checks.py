"""Checks of what people, agents and imports hand to remindkit: reminder text,
labels, ids, session ids, and the parts of a session definition that run code or
send keys (a session definition is code: see DESIGN's trust rules). Pure
functions; a refusal is an ``InvalidInput`` with a stable code."""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import InvalidInput, NotFound

MAX_SESSION_ID = 200  # characters


def new_id() -> str:
    return "rem_" + secrets.token_hex(6)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_LINE_BREAK = re.compile(r"[\u2028\u2029]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")  # JSON "\ud800" or undecodable argv bytes; not storable


def _has_control(s: str) -> bool:
    return _CONTROL.search(s) is not None or _SURROGATE.search(s) is not None


def _not_unicode(what: str) -> InvalidInput:
    return InvalidInput(
        f"{what} is not valid Unicode text (it has a lone surrogate such as \\ud800)",
        code="invalid_argument",
    )


def _has_nul(what: str) -> InvalidInput:
    # PostgreSQL text cannot hold NUL; refused on every backend so that a store can move
    return InvalidInput(f"{what} cannot contain NUL characters", code="invalid_argument")


def check_text(text: object, max_len: int) -> str:
    if not isinstance(text, str):
        raise InvalidInput("the reminder text must be a string", code="empty_text")
    s = text.strip()
    if not s:
        raise InvalidInput("the reminder needs text: say what to remind about", code="empty_text")
    if len(s) > max_len:
        raise InvalidInput(
            f"the text has {len(s)} characters; at most {max_len} are allowed",
            code="text_too_long",
            limit=max_len,
        )
    if _SURROGATE.search(s):
        raise _not_unicode("the reminder text")
    if "\x00" in s:
        raise _has_nul("the reminder text")
    return s


def check_label(label: object, max_len: int) -> str | None:
    if label is None:
        return None
    if not isinstance(label, str):
        raise InvalidInput("a label must be a string", code="invalid_label")
    s = label.strip()
    if not s:
        return None
    if len(s) > max_len:
        raise InvalidInput(
            f"the label has {len(s)} characters; at most {max_len} are allowed",
            code="label_too_long",
        )
    if _has_control(s):
        raise InvalidInput(
            "a label cannot contain control characters or lone surrogates", code="invalid_label"
        )
    return s


def check_announce(announce: object, max_len: int) -> str | None:
    if announce is None:
        return None
    if not isinstance(announce, str):
        raise InvalidInput("announce must be a string", code="invalid_argument")
    s = " ".join(announce.split())
    if not s:
        return None
    if len(s) > max_len:
        raise InvalidInput(
            f"announce has {len(s)} characters; at most {max_len} are allowed",
            code="announce_too_long",
        )
    if _SURROGATE.search(s):
        raise _not_unicode("announce")
    if "\x00" in s:
        raise _has_nul("announce")
    return s


def check_printable(value: object, what: str, max_len: int = 1_000) -> str:
    """A free-text setting (a session title, a voice name): a string of at most
    ``max_len`` characters with no control characters, line separators or lone surrogates."""
    if (
        not isinstance(value, str)
        or len(value) > max_len
        or _has_control(value)
        or _LINE_BREAK.search(value)
    ):
        raise InvalidInput(
            f"{what} must be printable text of at most {max_len} characters",
            code="invalid_argument",
        )
    return value


def check_session_id(session: object) -> str | None:
    """A session id: 1-200 printable characters (beyond its project's ``@<project>/``
    prefix, for a session of a project other than ``default``: :func:`session_key`)."""
    if session is None:
        return None
    own = session
    if isinstance(session, str):
        m = _NAMESPACED.match(session)
        if m is not None:
            own = session[m.end() :]
    if (
        not isinstance(session, str)
        or not isinstance(own, str)
        or not own.strip()
        or len(own) > MAX_SESSION_ID
        or _has_control(session)
    ):
        raise InvalidInput(
            f"{str(session)[:250]!r} is not a session id (1-{MAX_SESSION_ID} printable characters)",
            code="invalid_session",
        )
    return session.strip()


# -- projects: namespaces of sessions -----------------------------------------------------

DEFAULT_PROJECT = "default"
_PROJECT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", re.ASCII)
_NAMESPACED = re.compile(r"@([A-Za-z0-9][A-Za-z0-9_.-]{0,63})/", re.ASCII)


def check_project(name: object) -> str:
    if not isinstance(name, str) or not _PROJECT_NAME.fullmatch(name):
        raise InvalidInput(
            f"{str(name)[:100]!r} is not a project name (1-64 of A-Z a-z 0-9 _ . -, starting with a letter or digit)",
            code="invalid_project",
        )
    return name


def session_key(project: str, session: str) -> str:
    """The store's id of session ``session`` of ``project``. Each project is a namespace
    of its own: a session of ``default`` (every session of the CLI, the tools, the
    notebook, the MCP server and the Telegram bot) is stored under its id, a session of
    any other project under ``@<project>/<id>``, so that a party acting in one project
    (an API token) can neither make nor reach a session another surface will use. An id
    already in the project's namespace is kept (what the API hands out comes back)."""
    if project == DEFAULT_PROJECT or session.startswith(f"@{project}/"):
        return session
    return f"@{project}/{session}"


def session_project(key: str) -> str:
    """The project whose namespace a stored session id is in (see :func:`session_key`)."""
    m = _NAMESPACED.match(key)
    return DEFAULT_PROJECT if m is None else m.group(1)


def session_name(key: str) -> str:
    """A stored session id as its project names it (:func:`session_key` undone)."""
    m = _NAMESPACED.match(key)
    return key if m is None else key[m.end() :]


def check_id(reminder_id: object) -> str:
    if (
        not isinstance(reminder_id, str)
        or not reminder_id
        or len(reminder_id) > 100
        or _has_control(reminder_id)
    ):
        raise NotFound(f"No reminder by the id of {reminder_id!r} was found", code="not_found")
    return reminder_id


# -- session definitions ------------------------------------------------------------------

# the fields of a session definition that run code, send data somewhere or name a secret
SENSITIVE = (
    "argv",
    "fresh_argv",
    "env",
    "pass_env",
    "cwd",
    "api_key_env",
    "base_url",
    "extra",
    "url",  # a webhook's receiver
    "secret_env",  # the variable whose secret signs a webhook's requests
    "route",  # the Telegram chat a thread's replies go to
)
DISABLED = "disabled"  # config key: why the session does not run (set by an untrusted import)
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_SECRET_ENV = "REMINDKIT_WEBHOOK_SECRET"
# request keys remindkit sets or relies on: config.extra cannot replace them
RESERVED_REQUEST_KEYS = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "functions",
        "function_call",
        "stream",
        "stream_options",
        "n",
        "response_format",
    }
)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}", re.ASCII)


def comma_names(value: str | None) -> list[str]:
    return [p.strip() for p in (value or "").split(",") if p.strip()]


def allowed_key_envs(env: Mapping[str, str] | None = None) -> frozenset[str]:
    env = os.environ if env is None else env
    return frozenset({DEFAULT_KEY_ENV, *comma_names(env.get("REMINDKIT_API_KEY_ENVS"))})


def check_key_env(name: object, env: Mapping[str, str] | None = None) -> str:
    """``name`` if an openai session may read its key from it, else ``key_env_not_allowed``."""
    allowed = allowed_key_envs(env)
    if not isinstance(name, str) or name not in allowed:
        raise InvalidInput(
            f"api_key_env {name!r} is not allowed: use {', '.join(sorted(allowed))}, or add the name "
            "to REMINDKIT_API_KEY_ENVS",
            code="key_env_not_allowed",
        )
    return name


def allowed_secret_envs(env: Mapping[str, str] | None = None) -> frozenset[str]:
    env = os.environ if env is None else env
    return frozenset({DEFAULT_SECRET_ENV, *comma_names(env.get("REMINDKIT_WEBHOOK_SECRET_ENVS"))})


def check_secret_env(name: object, env: Mapping[str, str] | None = None) -> str:
    """``name`` if a webhook may sign with the secret it holds, else ``secret_env_not_allowed``."""
    allowed = allowed_secret_envs(env)
    if not isinstance(name, str) or name not in allowed:
        raise InvalidInput(
            f"secret_env {str(name)[:100]!r} is not allowed: use {', '.join(sorted(allowed))}, "
            "or add the name to REMINDKIT_WEBHOOK_SECRET_ENVS",
            code="secret_env_not_allowed",
        )
    return name


def check_webhook_url(url: object) -> str:
    """An http(s) URL with a host, at most 2,000 printable characters (``invalid_argument``)."""
    from urllib.parse import urlsplit

    try:
        ok = (
            isinstance(url, str)
            and len(url) <= 2_000
            and not _has_control(url)
            and urlsplit(url).scheme in ("http", "https")
            and bool(urlsplit(url).hostname)
        )
    except ValueError:
        ok = False
    if not ok:
        raise InvalidInput(f"{str(url)[:100]!r} is not an http(s) URL", code="invalid_argument")
    assert isinstance(url, str)
    return url


def request_extra(extra: object) -> dict[str, Any]:
    """``config.extra`` without the keys remindkit sets itself."""
    if not isinstance(extra, dict):
        return {}
    return {str(k): v for k, v in extra.items() if str(k) not in RESERVED_REQUEST_KEYS}


def untrusted_session_config(config: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """An imported config without the fields that run code or send keys, and their names."""
    dropped = [k for k in SENSITIVE if k in config]
    kept = {k: v for k, v in config.items() if k not in SENSITIVE and k != DISABLED}
    if dropped:
        kept[DISABLED] = (
            f"imported without --trust-sessions ({', '.join(dropped)} left out); "
            "complete it with `remindkit session add`"
        )
    return kept, dropped


def check_env_names(names: Iterable[object]) -> None:
    for name in names:
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise InvalidInput(
                f"{name!r} is not an environment variable name", code="invalid_command"
            )
