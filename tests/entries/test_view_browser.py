"""view.html as a user opens it: a long book annotated by annotate.py (LitSeg-Lite on a scripted
model), rendered by headless Chromium; every chunk's subtitle is on the page, and a contents
list links to every unit."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from litseg.utils.jsonl import read_jsonl
from litseg.annotation.view import render_html
from tests.browser import colour_runs, dump_dom, ink, last_inked_row, needs_chromium, screenshot
from tests.conftest import REPO

CHAPTERS = 24
_CHAPTER = re.compile(r"In chapter (\d+) of")
_NUMBERED = re.compile(r"(?m)^\[(\d+)\] ")


def subtitled_lite_model(**_settings: Any) -> Any:
    """``llm.backend: tests.entries.test_view_browser:subtitled_lite_model``: a LitSeg-Lite answer with
    blocks of four sentences and a distinct subtitle per block (with characters HTML escapes)."""
    from litseg.llm.testing import ScriptedChatModel

    def answer(request: Any) -> str:
        user = next(m["content"] for m in request.messages if m["role"] == "user")
        n = max(int(i) for i in _NUMBERED.findall(user))
        chapter = _CHAPTER.search(user).group(1)
        segments = [{"subtitle": f"Ch. {chapter} & part {k + 1}: <the keeper's watch>", "from_idx": start,
                     "to_idx": min(n, start + 3), "context_idx": []} for k, start in enumerate(range(1, n + 1, 4))]
        step3 = {"chapter_title": f"Chapter {chapter}", "step_3_turning_points": [], "segments": segments}
        return json.dumps({"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"}, "step3": step3})

    return ScriptedChatModel(answer, name="subtitled-lite")


@pytest.fixture(scope="module")
def long_book_run(tmp_path_factory) -> Path:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf, open_dict

    from litseg.annotation.entry import run_annotate
    from tests.teacher_fakes import write_book

    root = tmp_path_factory.mktemp("long-book")
    book = write_book(root / "long.md", "The Long Watch", chapters=CHAPTERS, sentences=6)
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        cfg = compose("annotate", overrides=["method=litseg_lite", "prompt=litseg_lite_compact", f"input={book}", "print_table=0",
                                             "export.enabled=false"])
    with open_dict(cfg):
        cfg.llm = OmegaConf.create({"backend": "tests.entries.test_view_browser:subtitled_lite_model"})
    summary = run_annotate(cfg, root / "run")
    assert summary["units"] == CHAPTERS and summary["units_failed"] == 0
    return root / "run"


def test_contents_list_links_every_unit_and_single_units_need_none():
    chunk = {"book_id": "b", "chunk_id": "b:1:1", "from_idx": 1, "to_idx": 1, "main_text": "x", "subtitle": "s"}
    one = render_html("t", [{**chunk, "unit_id": "0001"}], [])
    assert "<nav" not in one  # a single unit: nothing to navigate
    two = render_html("t", [{**chunk, "unit_id": "0001", "unit_title": "Start"},
                            {**chunk, "unit_id": "0002", "unit_title": "End <b>"}], [])
    assert "<a href='#unit-1'>b &middot; Start</a>" in two and "<a href='#unit-2'>b &middot; End &lt;b&gt;</a>" in two
    assert "<h2 id='unit-1'>" in two and "<h2 id='unit-2'>" in two


@needs_chromium
@pytest.mark.slow
def test_view_html_in_a_browser_shows_every_subtitle_and_a_working_contents_list(long_book_run, tmp_path):
    from bs4 import BeautifulSoup

    page = long_book_run / "view.html"
    chunks = read_jsonl(long_book_run / "chunks.jsonl")
    assert len(chunks) == CHAPTERS * 2 and all(c["subtitle"] for c in chunks)

    dom = BeautifulSoup(dump_dom(page), "html.parser")
    shown = [div.get_text() for div in dom.select("div.chunk div.sub")]
    assert sorted(shown) == sorted(c["subtitle"] for c in chunks)  # each one, escaped correctly, once

    links = dom.select("nav.toc a[href^='#']")
    assert len(links) == CHAPTERS  # one entry per unit, in reading order
    assert [a.get_text().split(" · ")[-1] for a in links] == [f"Chapter {i}" for i in range(1, CHAPTERS + 1)]
    for a in links:
        target = dom.find(id=a["href"][1:])
        assert target is not None and target.name == "h2" and target.get_text().endswith(a.get_text().split(" · ")[-1])

    # What the browser draws. The top of the page: the title and the contents list.
    top = screenshot(page, tmp_path / "top.png")
    assert ink(top) > 0.01
    # The whole page in one tall window: every chunk's box is drawn (its left border, blue and
    # brown in turn), and the page ends inside the window, so nothing was left out.
    tall = screenshot(page, tmp_path / "page.png", size=(1100, 14000))
    assert 1000 < last_inked_row(tall) < 14000 - 200
    assert colour_runs(tall, [(0x6A, 0x8C, 0xAF), (0xC0, 0x8A, 0x4A)]) == len(chunks)
