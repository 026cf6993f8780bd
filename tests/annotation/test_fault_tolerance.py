"""The teacher at corpus scale against a misbehaving OpenAI-compatible server (loopback stand-in):
HTTP 429/500/503, hangs, dropped and reset connections, bodies that are not JSON, malformed and
truncated answers; several servers sharing the load; and a run killed with SIGKILL halfway."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from litseg.annotation.entry import run_annotate
from litseg.annotation.export import iter_export_rows
from litseg.annotation.store import CHUNKS, LEDGER, SENTENCES
from litseg.utils.jsonl import read_jsonl
from litseg.testing.fake_openai_server import FakeOpenAIServer
from tests.conftest import REPO
from tests.teacher_fakes import stage_of, teacher_answer, write_corpus

# Client settings that make faults cheap: short timeouts, near-zero backoff.
CLIENT = ["llm.model=fake-model", "llm.cache.enabled=false", "llm.timeout_s=0.6", "llm.connect_timeout_s=1",
          "llm.max_retries=3", "llm.backoff_base_s=0.01", "llm.backoff_max_s=0.05", "llm.max_retry_after_s=0.05",
          "+llm.endpoint_cooldown_s=0.2"]
TRANSIENT = ("429", "500", "503", "hang", "drop", "reset", "bad_body")


def responder(body: dict[str, Any]) -> str:
    return teacher_answer(body["messages"])


def compose_openai(base_urls: str, *overrides: str) -> DictConfig:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        return compose("annotate", overrides=["method=litseg", "llm=openai", f"llm.base_urls='{base_urls}'", *CLIENT,
                                              "print_table=0", "view=false", *overrides])


def chapter(body: dict[str, Any]) -> str:
    first_user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return first_user[:300]


class FaultPlan:
    """Persistent faults for four chosen units, and a transport fault on every other first
    attempt of the rest, cycling through all kinds."""

    def __init__(self) -> None:
        self.first_attempts = 0

    def __call__(self, body: dict[str, Any], attempt: int) -> str | None:
        planned = persistent_fault(body)
        if planned is not None or attempt > 1:
            return planned
        self.first_attempts += 1
        if self.first_attempts % 2:
            return None
        return TRANSIENT[(self.first_attempts // 2) % len(TRANSIENT)]


def persistent_fault(body: dict[str, Any]) -> str | None:
    stage, text = stage_of(body["messages"]), chapter(body)
    # Persistent faults of particular units: their fallbacks must show in the diagnostics.
    if "In chapter 1 of Book 2," in text and stage == "stage3":
        return "malformed"  # every stage-3 answer unreadable -> whole-unit fallback
    if "In chapter 2 of Book 3," in text and stage == "stage1":
        return "malformed"  # every stage-1 answer unreadable -> stage 1 unavailable
    if "In chapter 1 of Book 4," in text and stage == "stage2":
        return "500"  # the server never answers stage 2 -> the unit fails (no chunks), a rerun retries it
    if "In chapter 2 of Book 1," in text and stage == "stage2" and len(body["messages"]) == 2:
        return "malformed"  # first stage-2 answer unreadable, the retry with feedback succeeds
    if "In chapter 1 of Book 1," in text and stage == "stage3" and len(body["messages"]) == 2:
        return "truncated"  # first stage-3 answer cut in half: invalid, the retry succeeds
    return None


def units_by_chapter(run: Path) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["book_id"], d["unit_id"]): d for d in read_jsonl(run / LEDGER)}


def test_teacher_run_survives_every_kind_of_server_fault(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus", books=4, chapters=2, sentences=8)
    with FakeOpenAIServer(responder, fault_plan=FaultPlan(), hang_s=2.0, retry_after_s=0.01) as srv:
        cfg = compose_openai(srv.base_url, f"input={corpus}", "method.workers=8", "method.max_retries=1",
                             "method.stage_max_retries=1")
        summary = run_annotate(cfg, tmp_path / "run")
        served = dict(srv.stats.served)
    assert set(TRANSIENT) | {"malformed", "truncated"} <= set(served), served
    # A stage the server never answered (HTTP 500 after the backend's retries) fails its unit: it
    # is not "done" with the step marked unavailable.
    assert (summary["units"], summary["units_failed"], summary["books_failed"]) == (7, 1, [])
    assert summary["fallbacks"] == {"none": 6, "whole_unit": 1}
    assert summary["stages_unavailable"] == {"stage1": 1}

    # Every unit has chunks whose main ranges cover all its sentences.
    run = tmp_path / "run"
    sentences: dict[tuple[str, str], set[int]] = {}
    for s in read_jsonl(run / SENTENCES):
        sentences.setdefault((s["book_id"], s["unit_id"]), set()).add(s["idx"])
    covered: dict[tuple[str, str], set[int]] = {}
    for c in read_jsonl(run / CHUNKS):
        covered.setdefault((c["book_id"], c["unit_id"]), set()).update(c["main_ids"])
    assert len(sentences) == 7 and covered == sentences

    # Every fallback is on record, with what caused it.
    units = units_by_chapter(run)
    whole = units[("book-02", "0001")]
    assert whole["fallback"] == "whole_unit" and whole["stages"]["stage3"]["tries"] == 2
    # The mangled JSON reads as an answer without usable segments, twice.
    assert all(not a["valid"] and {"empty", "segment_malformed"} <= set(a["issue_codes"]) for a in whole["attempts"])
    unread = units[("book-03", "0002")]
    assert unread["stages_unavailable"] == ["stage1"] and unread["stages"]["stage1"]["tries"] == 2
    codes = [a["issues"][0]["code"] for a in unread["stages"]["stage1"]["attempts"]]
    assert set(codes) <= {"parse_error", "schema_error"}
    cut = units[("book-01", "0001")]
    assert cut["attempts"][0]["finish_reason"] == "length" and not cut["attempts"][0]["valid"]
    assert cut["tries"] == 2 and cut["attempts"][1]["valid"] and cut["fallback"] == "none"
    assert ("book-04", "0001") not in units
    down = [f for f in read_jsonl(run / "failures.jsonl") if (f["book_id"], f["unit_id"]) == ("book-04", "0001")]
    assert len(down) == 1 and down[0]["error"].startswith("model unreachable: stage2: HTTP 500")
    assert down[0]["n_chunks"] == 0 and [a["error"] is not None for a in down[0]["attempts"]] == [True]
    recovered = units[("book-01", "0002")]
    assert recovered["stages"]["stage2"]["status"] == "ok" and recovered["stages"]["stage2"]["tries"] == 2
    assert all(u["fallback"] == "none" for k, u in units.items() if k != ("book-02", "0001"))


def test_two_servers_share_the_load_and_one_down_slows_nothing_down(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus", books=2, chapters=2, sentences=6)
    with FakeOpenAIServer(responder, latency_s=0.02) as a, FakeOpenAIServer(responder, latency_s=0.02) as b:
        summary = run_annotate(compose_openai(f"{a.base_url},{b.base_url}", f"input={corpus}", "method.workers=4"),
                               tmp_path / "both")
        assert summary["units"] == 4 and summary["fallbacks"] == {"none": 4}
        assert a.stats.requests > 0 and b.stats.requests > 0
        assert a.stats.requests + b.stats.requests == 12
        dead = FakeOpenAIServer(responder).start()
        dead_url = dead.base_url
        dead.stop()  # its port now refuses connections
        a.reset_stats()
        summary = run_annotate(compose_openai(f"{dead_url},{a.base_url}", f"input={corpus}", "method.workers=4"),
                               tmp_path / "one_down")
        assert summary["units"] == 4 and summary["fallbacks"] == {"none": 4} and summary["units_failed"] == 0
        assert a.stats.requests == 12


def _ledger_keys(run: Path) -> list[str]:
    return [row["key"] for row in read_jsonl(run / LEDGER)]


def test_kill_9_halfway_then_restart_finishes_with_exactly_the_uninterrupted_units(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus", books=5, chapters=2, sentences=8)
    with FakeOpenAIServer(responder, latency_s=0.2) as srv:
        overrides = [f"input={corpus}", "method.workers=2"]
        reference = run_annotate(compose_openai(srv.base_url, *overrides), tmp_path / "reference")
        assert reference["units"] == 10

        run = tmp_path / "killed"
        cmd = [sys.executable, "annotate.py", "method=litseg", "llm=openai", f"llm.base_urls={srv.base_url}", *CLIENT,
               "print_table=0", "view=false", *overrides, f"hydra.run.dir={run}"]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        try:
            while len(_ledger_keys(run)) < 3:
                assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read()[-2000:]!r}"
                assert time.monotonic() < deadline, "no unit committed in time"
                time.sleep(0.02)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
            proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL
        committed = _ledger_keys(run)
        assert 3 <= len(committed) < 10, "the kill must land halfway"

        srv.reset_stats()
        restart = run_annotate(compose_openai(srv.base_url, *overrides), run)
        requests_after_restart = srv.stats.requests

    # No finished unit redone, none lost, no duplicate row.
    assert restart["units_skipped"] == len(committed) and restart["units"] == 10 - len(committed)
    assert requests_after_restart == 3 * restart["units"]
    keys = _ledger_keys(run)
    assert len(keys) == len(set(keys)) == 10 and set(committed) <= set(keys)
    assert sorted(keys) == sorted(_ledger_keys(tmp_path / "reference"))
    chunk_ids = [c["chunk_id"] for c in read_jsonl(run / CHUNKS)]
    assert len(chunk_ids) == len(set(chunk_ids)) == reference["chunks"]
    # The exported datasets are identical, row for row.
    for table in ("chunks", "sentences"):
        expected = list(iter_export_rows(tmp_path / "reference" / "dataset", table))
        assert list(iter_export_rows(run / "dataset", table)) == expected
