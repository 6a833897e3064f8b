"""The runtime folder: where one user's remindkit processes keep their sockets and
lock files (the wake-up sockets, the engines' liveness locks, the command hand-off).

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

import os
import stat
import tempfile
from pathlib import Path


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


__all__ = ["UnsafeFolder", "check_private_dir", "runtime_base", "runtime_dir"]
