"""The local credential of the HTTP API: one secret per user, in the remindkit home.

``remindkit api`` admits the user's own clients with it, as Jupyter does with its
token: the CLI, the Python SDK (:mod:`remindkit.client`) and the TypeScript client
read it from ``<home>/api-credential`` (0600, in a 0700 home) and send it as a
bearer token; the browser never sees it, it gets a cookie instead, through a
one-time login URL (:func:`login_ticket`). Nothing here is a mode without a
credential: a request that brings none is refused.

A running server also writes ``<home>/api-server-<pid>.json`` (0600): its URLs, pid
and instance id. A client sends the credential only to a URL listed there by a live
server, never to any address it is handed (another local user may hold a port).

Pure standard library: the CLI's ``api open`` and the SDK import it without FastAPI.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .runtime import process_alive
from .statusfile import home_from_env

CREDENTIAL_FILE = "api-credential"
SERVER_PREFIX = "api-server-"
PREFIX = "rk_local_"
LOGIN_TTL_S = 600  # a login URL is good once, for this long
COOKIE_TTL_S = 7 * 86400  # a browser's login lasts this long (or until the credential changes)


class CredentialError(PermissionError):
    """The credential file is not ours alone (another owner, a link, open to others)."""


def credential_path(home: Path) -> Path:
    return home / CREDENTIAL_FILE


def _private_home(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = os.lstat(home)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return  # a linked home is the user's own choice; the file's own checks still hold
    if st.st_uid == os.getuid() and st.st_mode & 0o077:
        os.chmod(home, 0o700)


def _read_private(path: Path) -> str | None:
    """The text of ``path`` if it is a regular file of ours that nobody else can read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:  # a link (ELOOP), or not ours to read
        raise CredentialError(f"{path}: {exc.strerror}") from None
    with os.fdopen(fd, "r", encoding="utf-8") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise CredentialError(f"{path} is not a regular file")
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise CredentialError(f"{path} belongs to another user")
        if st.st_mode & 0o077:
            raise CredentialError(f"{path} is open to others (chmod 600 it, or remove it)")
        return fh.read(4096)


def _write_private(path: Path, text: str, *, replace: bool) -> None:
    """Write ``text`` to a new 0600 file at ``path`` (atomically when ``replace``)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    target = path.with_name(f".{path.name}.{secrets.token_hex(4)}") if replace else path
    fd = os.open(target, flags, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if replace:
            os.replace(target, path)
    except BaseException:
        if replace:
            with contextlib.suppress(OSError):
                os.unlink(target)
        raise


def load_credential(home: Path, *, create: bool = False) -> str | None:
    """The user's credential; with ``create``, made (once) if there is none."""
    path = credential_path(home)
    text = _read_private(path)
    if text is None and create:
        _private_home(home)
        with contextlib.suppress(FileExistsError):  # another process made it first
            _write_private(path, PREFIX + secrets.token_urlsafe(32) + "\n", replace=False)
        text = _read_private(path)
    if text is None:
        return None
    value = text.strip()
    if not value.startswith(PREFIX) or len(value) > 200:
        raise CredentialError(f"{path} does not hold a remindkit credential")
    return value


def reset_credential(home: Path) -> str:
    """A new credential in place of the old one: every client and browser login made
    with the old one is refused from then on (servers re-read the file)."""
    _private_home(home)
    value = PREFIX + secrets.token_urlsafe(32)
    _write_private(credential_path(home), value + "\n", replace=True)
    return value


class LocalCredential:
    """The credential as a server holds it: re-read when the file changes (checked at
    most once a second), compared in constant time."""

    def __init__(self, home: Path, *, clock: Any = time.monotonic) -> None:
        self.home = home
        self.path = credential_path(home)
        self._clock = clock
        _private_home(home)  # a home others can read or enter is tightened to 0700
        self._value = load_credential(home, create=True) or ""
        self._stamp = self._stat()
        self._checked = clock()

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns

    @property
    def value(self) -> str:
        now = self._clock()
        if now - self._checked >= 1.0:
            self._checked = now
            stamp = self._stat()
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._value = load_credential(self.home) or ""
                except CredentialError:
                    self._value = ""  # refuse everyone rather than trust a file others touched
        return self._value

    def matches(self, token: str) -> bool:
        value = self.value
        return bool(value) and hmac.compare_digest(token.encode(), value.encode())


def _mac(key: str, *parts: str) -> str:
    msg = "\0".join(parts).encode()
    return hmac.new(key.encode(), msg, hashlib.sha256).hexdigest()[:43]


def login_ticket(credential: str, instance: str, *, now: float | None = None) -> str:
    """A login ticket for the server ``instance``: good once, for ``LOGIN_TTL_S``."""
    nonce = secrets.token_urlsafe(12)
    expires = str(int((time.time() if now is None else now) + LOGIN_TTL_S))
    return f"{nonce}.{expires}.{_mac(credential, 'login', instance, nonce, expires)}"


def check_ticket(credential: str, instance: str, ticket: str, *, now: float) -> str | None:
    """The ticket's nonce if ``credential`` made it for ``instance`` and it has not
    expired (whether it was used before is the server's to know), else None."""
    parts = ticket.split(".")
    if len(parts) != 3 or not credential or len(ticket) > 200:
        return None
    nonce, expires, mac = parts
    if not expires.isascii() or not expires.isdigit() or int(expires) < now:
        return None
    if int(expires) > now + LOGIN_TTL_S + 5:
        return None
    good = _mac(credential, "login", instance, nonce, expires)
    return nonce if hmac.compare_digest(good.encode(), mac.encode()) else None


def cookie_value(credential: str, *, now: float | None = None) -> str:
    expires = str(int((time.time() if now is None else now) + COOKIE_TTL_S))
    return f"{expires}.{_mac(credential, 'cookie', expires)}"


def check_cookie(credential: str, value: str, *, now: float) -> bool:
    expires, _, mac = value.partition(".")
    if not credential or not expires.isascii() or not expires.isdigit() or len(value) > 100:
        return False
    if int(expires) < now:
        return False
    good = _mac(credential, "cookie", expires)
    return hmac.compare_digest(good.encode(), mac.encode())


# -- the running servers --------------------------------------------------------------


def server_file(home: Path, pid: int | None = None) -> Path:
    return home / f"{SERVER_PREFIX}{os.getpid() if pid is None else pid}.json"


def write_server(home: Path, info: Mapping[str, Any]) -> Path:
    """Say that this process serves ``info["urls"]`` (removed by :func:`remove_server`)."""
    _private_home(home)
    path = server_file(home)
    _write_private(path, json.dumps(dict(info, pid=os.getpid())), replace=True)
    return path


def remove_server(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def live_servers(home: Path) -> list[dict[str, Any]]:
    """The servers of this home that are running, newest first."""
    found = []
    try:
        names = [p for p in home.iterdir() if p.name.startswith(SERVER_PREFIX)]
    except OSError:
        return []
    for path in names:
        try:
            text = _read_private(path)
            info = json.loads(text) if text else None
        except (CredentialError, ValueError, OSError):
            continue
        if not isinstance(info, dict) or not isinstance(info.get("pid"), int):
            continue
        if not process_alive(info["pid"], others=False):  # of another user: not ours
            remove_server(path)
            continue
        found.append(info)
    found.sort(key=lambda i: i.get("started", 0), reverse=True)
    return found


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


def server_for(url: str, home: Path) -> dict[str, Any] | None:
    """The live server of ``home`` that serves ``url`` (same scheme, host and port)."""
    want = _origin(url)
    for info in live_servers(home):
        if any(_origin(u) == want for u in info.get("urls", [])):
            return info
    return None


def discover(
    base_url: str | None, token: str | None, env: Mapping[str, str] | None = None
) -> tuple[str, str | None]:
    """The URL and credential a client of the user's own should use: ``token`` as
    given, else ``REMINDKIT_TOKEN`` (an agent's session token), else the local
    credential when the URL (``base_url``, else ``REMINDKIT_API_URL``, else the newest
    live server's) is one that a live server of this home listens on."""
    env = os.environ if env is None else env
    home = home_from_env(env)
    url = base_url or env.get("REMINDKIT_API_URL") or ""
    if not url:
        servers = live_servers(home)
        url = servers[0]["urls"][0] if servers else "http://127.0.0.1:8765"
    if token is None:
        token = env.get("REMINDKIT_TOKEN") or None
    if token is None and server_for(url, home) is not None:
        with contextlib.suppress(CredentialError):
            token = load_credential(home)
    return url.rstrip("/"), token
