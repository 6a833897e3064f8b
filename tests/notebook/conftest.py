"""Fixtures for the notebook widgets: a recording comm (no kernel, no browser),
a kernel runtime on a fake clock without threads, and a Jupyter environment
whose ``python3`` kernel is this virtualenv's Python."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from remindkit.clock import FakeClock
from remindkit.settings import Settings
from remindkit.store import SqlStore, open_store

pytest.importorskip("ipywidgets")
pytest.importorskip("anywidget")


class CommLog:
    """What the widgets sent to the (absent) front-end."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, dict[str, Any]]] = []  # (comm_id, msg_type, data)

    def custom(self, widget: Any) -> list[dict[str, Any]]:
        """Custom messages sent to ``widget``'s front-end."""
        return [
            d["content"]
            for cid, kind, d in self.sent
            if cid == widget.comm.comm_id and kind == "comm_msg" and d.get("method") == "custom"
        ]

    def updates(self, widget: Any, name: str) -> list[Any]:
        """Values of trait ``name`` sent to ``widget``'s front-end, in order."""
        return [
            d["state"][name]
            for cid, kind, d in self.sent
            if cid == widget.comm.comm_id
            and kind == "comm_msg"
            and d.get("method") in ("update", "echo_update")
            and name in d.get("state", {})
        ]

    def clear(self) -> None:
        self.sent.clear()


def from_browser(widget: Any, content: dict[str, Any]) -> None:
    """Deliver a custom message from the browser to ``widget`` (as a click would)."""
    widget.comm.handle_msg(
        {"content": {"data": {"method": "custom", "content": content}}, "buffers": []}
    )


@pytest.fixture
def comm_log(monkeypatch: pytest.MonkeyPatch) -> CommLog:
    import comm
    from comm.base_comm import BaseComm

    log = CommLog()

    class RecordingComm(BaseComm):
        def publish_msg(
            self,
            msg_type: str,
            data: Any = None,
            metadata: Any = None,
            buffers: Any = None,
            **keys: Any,
        ) -> None:
            log.sent.append(
                (self.comm_id, msg_type, json.loads(json.dumps(data or {}, default=str)))
            )

    monkeypatch.setattr(comm, "create_comm", lambda *a, **kw: RecordingComm(*a, **kw))
    return log


@pytest.fixture
def demo_settings(tmp_path: Path) -> Settings:
    return Settings.from_env(env={}, home=tmp_path / "home", tz="UTC").with_limits(min_period_s=1)


@pytest.fixture
def nb_store(tmp_path: Path, demo_settings: Settings) -> Iterator[SqlStore]:
    s = open_store(f"sqlite:///{tmp_path / 'nb.db'}", settings=demo_settings)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def runtime(nb_store: SqlStore, clock: FakeClock, comm_log: CommLog) -> Iterator[Any]:
    """A kernel runtime with no threads: the hub runs refreshes at once, the
    engine runs when a test calls ``tick`` (delivery inline)."""
    from remindkit.notebook.runtime import KernelRuntime

    rt = KernelRuntime(nb_store, clock=clock, live=False, inline=True)
    try:
        yield rt
    finally:
        rt.engine.shutdown()
        rt.close()


@pytest.fixture
def jupyter_env(tmp_path: Path) -> dict[str, str]:
    """Environment for a kernel or a Jupyter server: private Jupyter folders, and a
    ``python3`` kernel spec that runs this interpreter (the venv's)."""
    data = tmp_path / "jupyter-data"
    spec = data / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (remindkit venv)",
                "language": "python",
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REMINDKIT_", "JUPYTER_"))}
    env.update(
        JUPYTER_DATA_DIR=str(data),
        JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"),
        JUPYTER_PLATFORM_DIRS="1",
        IPYTHONDIR=str(tmp_path / "ipython"),
        REMINDKIT_HOME=str(tmp_path / "rk-home"),
        REMINDKIT_DEMO_DIR=str(tmp_path / "demo"),
        REMINDKIT_TZ="UTC",
        PYTHONDONTWRITEBYTECODE="1",
    )
    (tmp_path / "demo").mkdir()
    return env
