"""A Sphinx extension: the reference pages made from the code as the site is built.

A page says where with a directive (MyST)::

    ```{remindkit-reference} cli
    ```

and gets :mod:`refpages`'s Markdown for that name, parsed as if written there
(headings included). When an HTML build finishes, the OpenAPI document is written
beside the pages as ``openapi.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import refpages
from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList


class ReferenceDirective(Directive):
    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        kind = self.arguments[0]
        make = refpages.KINDS.get(kind)
        if make is None:
            raise self.error(f"no reference named {kind!r} (one of {sorted(refpages.KINDS)})")
        text = make()
        lines = text.splitlines()
        first = next((i for i, line in enumerate(lines) if line.startswith("#")), None)
        if first is not None and any(line.strip() for line in lines[:first]):
            # MyST places the sections a directive makes before the nodes it returns:
            # text above the first heading would land at the end of the page
            raise self.error(f"the {kind!r} reference must start with a heading")
        holder = nodes.section()
        holder.document = self.state.document
        self.state.nested_parse(
            StringList(text.splitlines(), source=f"<remindkit-reference {kind}>"),
            self.content_offset,
            holder,
            match_titles=True,
        )
        return list(holder.children)


def _write_openapi(app: Any, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    Path(app.outdir, "openapi.json").write_text(refpages.openapi_json(), encoding="utf-8")


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("remindkit-reference", ReferenceDirective)
    app.connect("build-finished", _write_openapi)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
