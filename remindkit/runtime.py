"""The runtime folder: where one user's remindkit processes keep their sockets and
lock files (the wake-up sockets, the engines' liveness locks, the command hand-off),
and whether the process that left one is still running (:func:`process_alive`).

It is ``$XDG_RUNTIME_DIR/remindkit-UID`` when ``XDG_RUNTIME_DIR`` names a folder of
ours that no one else may write to (the login manager makes it 0700), else
``$TMPDIR/remindkit-UID`` (``/tmp`` by default). In a shared folder such as ``/tmp``
another user can take that name first (a folder of theirs, a link, a plain file), so
every level is made 0700, or, if it exists, checked without following links: a
directory, ours, with no access for group or others. Anything else raises
:class:`UnsafeFolder`, and the caller does without (engines poll instead of waiting
for hints, a command runs in its own process instead of handing itself over,
claims are taken over by their lease alone).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Any

# logging and tempfile load on first use: a command handed to the engine imports this
# module, and the two cost it about a tenth of its start-up (shutil, random, bz2, lzma)


def _warn(msg: str, *args: Any) -> None:
    import logging

    logging.getLogger(__name__).warning(msg, *args)


def process_alive(pid: int, *, others: bool) -> bool:
    """Whether a process with this id runs on this machine (signal 0: checked, nothing
    sent). ``others``: whether a process of another user, which we may not signal,
    counts (an engine of another account on a shared store does; the server that left
    a file in our own home does not: its id was taken by someone else's process).
    Where it cannot be told (not POSIX: signal 0 is ``CTRL_C_EVENT`` on Windows) it
    counts as running, and the caller's own evidence (a heartbeat, a lease) decides."""
    if os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return others
    except OSError:
        return True
    return True


class UnsafeFolder(OSError):
    """A runtime folder that is not ours alone (another user's, a link, a file, too open)."""


def runtime_base() -> Path:
    """``$XDG_RUNTIME_DIR`` if it is a folder of ours closed to others, else the temp folder."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base:
        try:
            st = os.stat(base)
        except OSError:
            st = None
        if (
            st is not None
            and stat.S_ISDIR(st.st_mode)
            and st.st_uid == os.getuid()
            and not stat.S_IMODE(st.st_mode) & 0o022
            and os.access(base, os.W_OK)
        ):
            return Path(base)
    # where tempfile.gettempdir() looks first: the variables, then /tmp
    for tmp in (*(os.environ.get(n) for n in ("TMPDIR", "TEMP", "TMP")), "/tmp"):
        if tmp and os.path.isdir(tmp) and os.access(tmp, os.W_OK | os.X_OK):
            return Path(os.path.abspath(tmp))
    import tempfile

    return Path(tempfile.gettempdir())


def runtime_dir(*parts: str, make: bool = True) -> Path:
    """``<base>/remindkit-UID[/part…]``, each level checked (and made 0700 when ``make``).
    Raises :class:`UnsafeFolder` for a level that is not ours alone, or (``make``
    false) that does not exist."""
    folder = runtime_base() / f"remindkit-{os.getuid()}"
    check_private_dir(folder, make=make)
    for part in parts:
        folder = folder / part
        check_private_dir(folder, make=make)
    return folder


def check_private_dir(path: Path, *, make: bool = True) -> None:
    """``path`` is (made, when ``make``) a directory of ours that no one else may enter;
    else :class:`UnsafeFolder`. Checked with ``lstat``: a link is refused, not followed."""
    if make:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:  # a file or a link where a folder above should be, no access
            raise UnsafeFolder(f"{path}: {exc.strerror}") from None
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise UnsafeFolder(f"{path}: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeFolder(f"{path} is a symbolic link")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeFolder(f"{path} is not a directory")
    if st.st_uid != os.getuid():
        raise UnsafeFolder(f"{path} belongs to uid {st.st_uid}, not to us ({os.getuid()})")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise UnsafeFolder(f"{path} has mode {oct(stat.S_IMODE(st.st_mode))}, not 0o700")


# -- a store's private files -------------------------------------------------------------


def make_private_file(path: Path) -> None:
    """Create the database folder (0700) and file (0600) before SQLite does, and
    tighten them (:func:`tighten_private_file`)."""
    _make_private_folders(path.parent)
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        os.close(fd)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if not side.exists():
            with contextlib.suppress(OSError):
                os.close(os.open(side, os.O_CREAT | os.O_RDWR, 0o600))
    tighten_private_file(path)


def tighten_private_file(path: Path) -> None:
    """A SQLite file of ours (and its ``-wal``, ``-shm``) others can read made 0600, its
    folder others can write to made 0700, each with a warning; every path that opens
    a store (the full store and the command line's driver-only reads) goes through it."""
    _tighten(path.parent, 0o022, 0o700)  # a folder of ours others can write to (0777)
    for suffix in ("", "-wal", "-shm"):
        _tighten(path.with_name(path.name + suffix), 0o077, 0o600)  # a store others can read (0644)


def _tighten(path: Path, too_open: int, mode: int) -> None:
    """Make ``path`` ``mode`` if it is ours (not a link) and has any of the ``too_open``
    bits, with a warning. Not following links: another user's link is left alone."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | (os.O_DIRECTORY if mode == 0o700 else 0))
    except OSError:
        return
    try:
        st = os.fstat(fd)
        shared = bool(st.st_mode & stat.S_ISVTX)  # /tmp and the like: shared on purpose, left alone
        if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & too_open and not shared:
            os.fchmod(fd, mode)
            _warn(
                "%s was %s; made it %s (remindkit keeps its store private)",
                path,
                oct(stat.S_IMODE(st.st_mode)),
                oct(mode),
            )
    except OSError as exc:
        _warn("cannot make %s private: %s", path, exc)
    finally:
        os.close(fd)


def _make_private_folders(folder: Path) -> None:
    """Make ``folder`` and each missing folder above it 0700 (``mkdir -p`` would make the
    ones above 0777 less the umask: world-writable under umask 000). Folders that
    exist are left as they are."""
    missing: list[Path] = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        try:
            made.mkdir(mode=0o700)
        except FileExistsError:  # another process made it at the same moment
            continue
        os.chmod(made, 0o700)


__all__ = [
    "UnsafeFolder",
    "check_private_dir",
    "make_private_file",
    "runtime_base",
    "runtime_dir",
    "tighten_private_file",
]
