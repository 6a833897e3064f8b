"""openai-agents 0.24 with ``convert_schemas_to_strict=True``, driven by ``Runner``
against a scripted Chat Completions model on loopback that makes strict-shaped calls
(every argument, ``null`` for the unused ones): over stdio and Streamable HTTP, in the
2026-07-28 revision it always negotiates on mcp 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from remindkit.protocol.tools import TOOLS

from .conftest import ApiServer, Driver, check_seen, client_python, drive_eras, http_job, stdio_job
from .standin import StrictModel

pytestmark = [pytest.mark.clients, pytest.mark.processes]
ERAS = ["modern"]


def check_strict(model: StrictModel) -> None:
    """What the SDK sent the model: every tool strict, with our schemas as they are
    (its strict conversion had nothing to change), and the calls strict-shaped."""
    assert model.tools, "the model was never asked"
    for sent in model.tools:
        by_name = {t["function"]["name"]: t["function"] for t in sent}
        assert set(by_name) == {t.name for t in TOOLS}
        for spec in TOOLS:
            fn = by_name[spec.name]
            assert fn.get("strict") is True, fn
            assert fn["parameters"] == spec.parameters, (spec.name, fn["parameters"])
    create = model.calls[0][1]
    assert create["after"] == "1s" and create["at"] is None and create["cron"] is None
    assert set(create) == set(TOOLS[0].parameters["properties"])


def test_openai_agents_over_stdio(
    db: str, home: Path, drivers: list[Driver], tmp_path: Path
) -> None:
    with StrictModel() as model:
        spec = stdio_job(db, home, "openai-agents-stdio", ERAS, model_url=model.base_url)
        driver = Driver.start(
            client_python("mcp2"), "openai_agents_client.py", spec, tmp_path / "d.log"
        )
        drivers.append(driver)
        seen = drive_eras(driver, db, home, ERAS)
    tools = driver.of("tools")[0]
    assert all(tools["strict"].values()), tools  # the conversion worked for every tool
    check_strict(model)
    check_seen("openai-agents", "stdio", seen)


def test_openai_agents_over_http(api: ApiServer, drivers: list[Driver], tmp_path: Path) -> None:
    with StrictModel() as model:
        spec = http_job(api, "openai-agents-http", ERAS, model_url=model.base_url)
        driver = Driver.start(
            client_python("mcp2"), "openai_agents_client.py", spec, tmp_path / "d.log"
        )
        drivers.append(driver)
        seen = drive_eras(driver, api.db, api.home, ERAS)
    tools = driver.of("tools")[0]
    assert all(tools["strict"].values()), tools
    check_strict(model)
    check_seen("openai-agents", "http", seen)
