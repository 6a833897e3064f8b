"""The SQLite store is created private to the user, whatever the umask: its folder
(and any missing folder above it that remindkit makes) 0700, the database, its
-wal and -shm files and the migration lock 0600, also after SQLite has removed
and made the -wal and -shm files again. Checked through ``open_store`` and
through the command line with REMINDKIT_HOME pointing at a folder that does not
exist yet, and for the folder of the wake-up sockets.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from remindkit.cli.main import main
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import open_store
from remindkit.store.wake import SocketWake

pytestmark = pytest.mark.reliability


@pytest.fixture(params=[0o000, 0o022], ids=["umask 000", "umask 022"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


def check_private(db: Path, made: list[Path], *, open_now: bool) -> None:
    for folder in made:
        assert mode(folder) == "0o700", f"{folder} is {mode(folder)}"
    for suffix in ("", "-wal", "-shm", ".migrate.lock"):
        path = db.with_name(db.name + suffix)
        if path.exists():
            assert mode(path) == "0o600", f"{path.name} is {mode(path)}"
    assert db.exists()
    if open_now:  # SQLite removes -wal and -shm when the last connection closes
        assert db.with_name(db.name + "-wal").exists() and db.with_name(db.name + "-shm").exists()


def test_open_store_makes_private_files(tmp_path: Path, umask: int) -> None:
    root = tmp_path / "a"
    db = root / "b" / "c" / "store.db"
    settings = Settings.from_env(env={}, home=tmp_path / "home", tz="UTC")
    for _ in range(2):  # the second time SQLite makes -wal and -shm again itself
        store = open_store(f"sqlite:///{db}", settings=settings)
        try:
            Reminders(store).create("private", session="s1", in_="5m")
            check_private(db, [root, root / "b", root / "b" / "c"], open_now=True)
        finally:
            store.close()


def test_cli_makes_a_private_home(
    tmp_path: Path, umask: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "x" / "remindkit"
    monkeypatch.setenv("REMINDKIT_HOME", str(home))
    monkeypatch.setenv("REMINDKIT_TZ", "UTC")
    monkeypatch.delenv("REMINDKIT_DB", raising=False)
    monkeypatch.delenv("REMINDKIT_SESSION", raising=False)
    for argv in (["ls"], ["remind", "private", "--in", "5m"], ["ls"]):
        assert main(argv, stdout=io.StringIO(), stderr=io.StringIO()) == 0
        check_private(home / "remindkit.db", [tmp_path / "x", home], open_now=False)


def test_an_existing_folder_is_left_as_it_is(tmp_path: Path, umask: int) -> None:
    """remindkit makes its own folders private; one the person made stays theirs."""
    folder = tmp_path / "mine"
    folder.mkdir(mode=0o750)
    os.chmod(folder, 0o750)
    store = open_store(
        f"sqlite:///{folder / 'store.db'}", settings=Settings.from_env(env={}, tz="UTC")
    )
    store.close()
    assert mode(folder) == "0o750" and mode(folder / "store.db") == "0o600"


def test_wake_sockets_folder_is_private(
    tmp_path: Path, umask: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = Path(tempfile.mkdtemp(prefix="rk-"))  # short: a socket path has at most 107 bytes
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    wake = SocketWake(tmp_path / "store.db")
    listener = wake.listen()
    assert listener is not None
    try:
        assert mode(wake.folder) == "0o700" and mode(wake.folder.parent) == "0o700"
    finally:
        listener.close()
        wake.close()
        shutil.rmtree(run)
