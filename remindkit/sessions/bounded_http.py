"""One HTTP exchange with a model server, bounded as a whole.

httpx's timeouts bound each operation (connect, each read), not the request: a
server that sends one byte every few seconds keeps a plain ``client.post`` open
for ever. :func:`bounded_request` runs the exchange under a deadline that every
socket operation keeps to (:mod:`remindkit.sessions.transport`), and reads at
most ``max_bytes`` of the body.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ModelError

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
    on_chunk: Callable[[bytes], None] | None = None,
) -> Answer:
    """The answer, or :class:`ModelError` ``model_unreachable`` (cannot connect,
    or no whole answer within ``timeout`` seconds) or ``model_response_too_large``.
    ``transport``: another transport (tests), else a :class:`BoundedTransport`.
    ``on_chunk``: called with each piece of a ``200`` body as it arrives (within the
    same deadline and byte bound; the whole body is still in the answer)."""
    import httpx

    from .transport import BoundedTransport, deadline, env_proxy

    try:
        with (
            deadline(timeout) as at,
            httpx.Client(transport=transport or BoundedTransport(proxy=env_proxy(url))) as http,
            http.stream(
                method,
                url,
                json=json,
                timeout=timeout,
                headers={"Accept-Encoding": "identity", **(headers or {})},
            ) as resp,
        ):
            chunks: list[bytes] = []
            size = 0
            for chunk in resp.iter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise ModelError(
                        f"{name} sent more than {max_bytes} bytes; the answer was dropped",
                        code="model_response_too_large",
                    )
                chunks.append(chunk)
                if on_chunk is not None and resp.status_code == 200:
                    on_chunk(chunk)
                if time.monotonic() > at:
                    raise httpx.ReadTimeout("the deadline of the whole request passed")
            return Answer(resp.status_code, dict(resp.headers), b"".join(chunks))
    except httpx.TimeoutException as exc:
        raise ModelError(
            f"{name} did not answer in {timeout:g}s ({exc})", code="model_unreachable"
        ) from None
    except httpx.HTTPError as exc:
        raise ModelError(f"cannot reach {name}: {exc}", code="model_unreachable") from None


__all__ = ["Answer", "bounded_request"]
