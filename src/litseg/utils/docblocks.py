"""Generated blocks in the docs: figures are written by the script that measures them.

A block looks like::

    <!-- BEGIN GENERATED student_eval (benchmarks/student_eval.py --write) sha256:1a2b3c4d5e6f -->
    ...the table...
    <!-- END GENERATED student_eval -->

:func:`write_block` replaces a block's body (or appends the block when the document lacks it) and
stamps the marker with a digest of the body; :func:`edited_blocks` finds blocks whose body no
longer matches its digest, i.e. edited by hand (a test fails on them).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

_BLOCK = re.compile(
    r"<!-- BEGIN GENERATED (?P<name>[\w.-]+) \((?P<script>[^)]*)\) sha256:(?P<digest>[0-9a-f]{12}) -->\n"
    r"(?P<body>.*?)"
    r"<!-- END GENERATED (?P=name) -->",
    re.S,
)


def digest(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:12]


def render_block(name: str, script: str, body: str) -> str:
    body = body if body.endswith("\n") else body + "\n"
    return (f"<!-- BEGIN GENERATED {name} ({script}) sha256:{digest(body)} -->\n{body}"
            f"<!-- END GENERATED {name} -->")


def write_block(doc: str | Path, name: str, script: str, body: str) -> Path:
    """Put ``body`` into block ``name`` of ``doc`` (appended under the text when absent)."""
    path = Path(doc)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    block = render_block(name, script, body)
    for m in _BLOCK.finditer(text):
        if m.group("name") == name:
            text = text[: m.start()] + block + text[m.end():]
            break
    else:
        text = (text.rstrip("\n") + "\n\n" if text else "") + block + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def read_blocks(doc: str | Path) -> dict[str, str]:
    text = Path(doc).read_text(encoding="utf-8")
    return {m.group("name"): m.group("body") for m in _BLOCK.finditer(text)}


def edited_blocks(doc: str | Path) -> list[str]:
    """Names of blocks whose body differs from the digest their script stamped."""
    text = Path(doc).read_text(encoding="utf-8")
    return [m.group("name") for m in _BLOCK.finditer(text) if digest(m.group("body")) != m.group("digest")]
