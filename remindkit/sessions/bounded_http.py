"""One HTTP exchange with a model server, bounded as a whole.

httpx's timeouts bound each operation (connect, each read), not the request: a
server that sends one byte every few seconds keeps a plain ``client.post`` open
for ever. :func:`bounded_request` runs the exchange on a worker thread and gives
up at an overall deadline (the worker stops at its next read), and reads at most
``max_bytes`` of the body.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..agent.model import ModelError

if TYPE_CHECKING:
    import httpx


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def text(self, limit: int = 300) -> str:
        return self.body[:limit].decode("utf-8", "replace")


def bounded_request(
    method: str,
    url: str,
    *,
    name: str,
    timeout: float,
    max_bytes: int,
    json: Any = None,
    headers: dict[str, str] | None = None,
    transport: httpx.BaseTransport | None = None,
    client: httpx.Client | None = None,
    on_chunk: Callable[[bytes], None] | None = None,
) -> Answer:
    """The answer, or :class:`ModelError` ``model_unreachable`` (cannot connect,
    or no whole answer within ``timeout`` seconds) or ``model_response_too_large``.
    ``client``: a client to reuse (its connections and TLS setup), else a new one
    on ``transport``. ``on_chunk``: called on the worker thread with each piece of a
    ``200`` body as it arrives (within the same deadline and byte bound; the whole
    body is still in the answer)."""
    import httpx

    deadline = time.monotonic() + timeout
    http: httpx.Client | None = None
    stop = threading.Event()
    done = threading.Event()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            nonlocal http
            http = client or httpx.Client(transport=transport, verify=_tls())
            with http.stream(
                method,
                url,
                json=json,
                timeout=timeout,
                headers={"Accept-Encoding": "identity", **(headers or {})},
            ) as resp:
                chunks: list[bytes] = []
                size = 0
                for chunk in resp.iter_bytes():
                    if stop.is_set() or time.monotonic() > deadline:
                        box["timeout"] = True
                        return
                    size += len(chunk)
                    if size > max_bytes:
                        box["too_large"] = size
                        return
                    chunks.append(chunk)
                    if on_chunk is not None and resp.status_code == 200:
                        on_chunk(chunk)
                box["answer"] = Answer(resp.status_code, dict(resp.headers), b"".join(chunks))
        except BaseException as exc:  # handed to the caller
            box["error"] = exc
        finally:
            if client is None and http is not None:
                http.close()
            done.set()

    worker = threading.Thread(target=work, daemon=True, name="remindkit-model-call")
    worker.start()
    finished = done.wait(timeout)
    stop.set()  # an abandoned worker stops at its next read
    if not finished or box.get("timeout"):
        raise ModelError(f"{name} did not answer in {timeout:g}s", code="model_unreachable")
    if "too_large" in box:
        raise ModelError(
            f"{name} sent more than {max_bytes} bytes; the answer was dropped",
            code="model_response_too_large",
        )
    exc = box.get("error")
    if isinstance(exc, httpx.TimeoutException):
        raise ModelError(
            f"{name} did not answer in {timeout:g}s ({exc})", code="model_unreachable"
        ) from None
    if isinstance(exc, httpx.HTTPError):
        raise ModelError(f"cannot reach {name}: {exc}", code="model_unreachable") from None
    if exc is not None:
        raise exc
    answer: Answer = box["answer"]
    return answer


_TLS: list[ssl.SSLContext] = []
_TLS_LOCK = threading.Lock()


def _tls() -> ssl.SSLContext:
    """One TLS context for every call (building one reads the CA bundle: slow)."""
    import httpx

    with _TLS_LOCK:
        if not _TLS:
            _TLS.append(httpx.create_ssl_context())
        return _TLS[0]


__all__ = ["Answer", "bounded_request"]
