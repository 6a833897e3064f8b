"""The notebooks in ``notebooks/``, executed top to bottom by a real kernel
(this virtualenv's Python) with nbclient. Their assertions are in their own
cells (in cells after the one that changed things: nbclient's stored widget
state can miss updates from threads of earlier cells); here we also check that
no cell failed, the widgets were shown, and nothing touched the real store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = pytest.mark.notebook
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


@pytest.mark.parametrize("name", ["quickstart", "agent_loop"])
def test_notebook_runs_top_to_bottom(
    name: str, jupyter_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in [k for k in list(os.environ) if k.startswith(("REMINDKIT_", "JUPYTER_"))]:
        monkeypatch.delenv(key)
    for key, value in jupyter_env.items():
        monkeypatch.setenv(key, value)
    work = tmp_path / "run"
    work.mkdir()
    book = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    assert all(not c.get("outputs") for c in book.cells if c.cell_type == "code"), (
        "commit notebooks without outputs"
    )
    client = nbclient.NotebookClient(
        book,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(work)}},
        store_widget_state=True,
    )
    client.execute()  # raises CellExecutionError on the first failing cell (an assertion included)

    assert client.km is None or not client.km.is_alive()
    outputs = [o for c in book.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    views = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert views, "the panel was displayed"
    state = book.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    models = {m["model_name"] for m in state.values()}
    assert "AnyModel" in models  # the pills and the chat view
    demo = Path(jupyter_env["REMINDKIT_DEMO_DIR"]) / "reminders.db"
    assert demo.exists(), "the notebook used the throwaway store"
    assert not (Path(jupyter_env["REMINDKIT_HOME"]) / "remindkit.db").exists(), (
        "the default store was not touched"
    )
