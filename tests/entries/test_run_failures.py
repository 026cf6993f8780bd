"""Nothing that failed is recorded as done (issue 12, items 1, 3 and 4).

* A model that cannot be reached (connection refused, timeout, HTTP 5xx after the backend's own
  retries) is no answer: the unit fails with no chunks, no feedback turn is spent on it, the run
  exits 1 naming the unit, and a rerun does it. A server that is not there at all stops the run
  at start, in one line.
* A run directory belongs to one setup: a run of another method, parameters, prompt, model or
  preprocessing into it is refused (or goes to a fresh folder with ``+new_dir=true``).
* The entry scripts turn known errors into one line and exit code 2 (a traceback with
  ``HYDRA_FULL_ERROR=1``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf

from litseg.chunkers.base import ConfigValueError
from litseg.chunkers.build import build_chunker_from_config
from litseg.chunkers.litseg import LitSegChunker
from litseg.chunkers.litseg_lite import LitSegLiteChunker
from litseg.chunkers.lumber import LumberChunker
from litseg.cli import exit_line, run_task
from litseg.errors import UNAVAILABLE, ModelUnreachable, SetupError
from litseg.run_result import SETUP_EXIT
from litseg.llm.base import ChatRequest, Completion, ModelUnavailable
from litseg.llm.openai_backend import OpenAIChatModel
from litseg.llm.testing import ScriptedChatModel
from litseg.annotation.annotate import SETUP, SUMMARY, RunSetupMismatch, annotate
from litseg.annotation.entry import annotate_task, run_annotate
from litseg.annotation.store import CHUNKS, FAILURES, LEDGER, RunStore
from litseg.utils.jsonl import read_jsonl
from litseg.segmentation.preprocess import prepare_document
from litseg.segmentation.runner import segment_with_retries
from litseg.segmentation.schema import get_schema
from litseg.testing.fake_openai_server import FakeOpenAIServer
from litseg.testing.configs import prompt_config
from tests.conftest import REPO, shared_data_dir
from tests.teacher_fakes import teacher_answer, write_corpus

DEMO = REPO / "src/litseg/data/demo/the_two_lanterns.md"
LITE_PROMPT = prompt_config("litseg_lite")
TEACHER_PROMPT = prompt_config("litseg")
LUMBER_PROMPT = OmegaConf.to_container(OmegaConf.load(REPO / "conf/prompt/lumberchunker.yaml"))
# Client settings that make a dead server cheap: one retry, near-zero backoff.
FAST_CLIENT = ["llm.model=fake-model", "llm.cache.enabled=false", "llm.max_retries=1", "llm.backoff_base_s=0.01",
               "llm.backoff_max_s=0.02", "llm.timeout_s=5", "llm.connect_timeout_s=1"]
# src first: a checkout that is not the installed one runs its own code
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}


def unreachable(message: str = "connection failed at http://127.0.0.1:9/v1: refused") -> Completion:
    return Completion(text="", error=message, finish_reason="error", error_kind=UNAVAILABLE)


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there once the socket is closed


def compose(*overrides: str) -> DictConfig:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        return hydra_compose("annotate", overrides=["print_table=0", "view=false", *overrides])


def run_script(script: str, *args: str, env: dict[str, str] | None = None, timeout: float = 300
               ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, script, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=env or ENV)


@pytest.fixture
def tale(tmp_path: Path):
    path = tmp_path / "tale.txt"
    path.write_text("CHAPTER I\n\nAnna walked to the mill at dawn. The river was high. She crossed the bridge.\n\n"
                    "Nobody answered. She went home again, puzzled.\n", encoding="utf-8")
    return prepare_document(path)


# ---------------------------------------------------------------- item 1: unreachable is no answer
def test_the_retry_loop_stops_at_an_unreachable_model_without_a_feedback_turn() -> None:
    valid = json.dumps({"chapter_title": "t", "segments": [{"subtitle": "s", "from_idx": 1, "to_idx": 3,
                                                            "context_idx": []}]})
    replies = [unreachable(), Completion(text=valid)]
    asked: list[list[dict[str, str]]] = []

    def ask(messages: list[dict[str, str]]) -> Completion:
        asked.append(messages)
        return replies[len(asked) - 1]

    with pytest.raises(ModelUnreachable, match="connection failed") as info:
        segment_with_retries(ask, [{"role": "user", "content": "[1] a [2] b [3] c"}], n=3,
                             answer_model=get_schema("segments"), sentence_words=[1, 1, 1], max_fallback_words=50,
                             max_retries=2, fallback="pieces")
    assert len(asked) == 1  # no second try, and no correction request about a reply that never came
    assert info.value.diagnostics["attempts"][0]["error"].startswith("connection failed")
    # A plain error (the server refused this request) is still retried as before.
    replies[0] = Completion(text="", error="HTTP 400: prompt too long", finish_reason="error")
    asked.clear()
    outcome = segment_with_retries(ask, [{"role": "user", "content": "x"}], n=3, answer_model=get_schema("segments"),
                                   sentence_words=[1, 1, 1], max_fallback_words=50, max_retries=2, fallback="pieces")
    assert len(asked) == 2 and outcome.diagnostics.fallback == "none"


@pytest.mark.parametrize("kind", ["litseg_lite", "litseg_stage1", "litseg_stage3", "lumberchunker"])
def test_chunkers_fail_a_unit_the_model_could_not_be_reached_for(kind: str, tale) -> None:
    unit = tale.units[0]
    down = ScriptedChatModel([unreachable()], cycle=True)
    if kind == "litseg_lite":
        chunker: Any = LitSegLiteChunker(down, LITE_PROMPT)
    elif kind == "litseg_stage1":
        chunker = LitSegChunker(down, TEACHER_PROMPT)
    elif kind == "litseg_stage3":
        # Stages 1 and 2 answer, stage 3 finds the server gone.
        def answer(request: ChatRequest) -> Any:
            return unreachable() if "carry out step 3" in request.messages[1]["content"] else \
                teacher_answer(request.messages)

        chunker = LitSegChunker(ScriptedChatModel(answer), TEACHER_PROMPT)
    else:
        chunker = LumberChunker(down, LUMBER_PROMPT, token_budget=8, budget_tokenizer="whitespace")
    result = chunker.chunk_unit(tale, unit)
    assert result.error is not None and result.error.startswith("model unreachable: ")
    assert result.chunks == []  # no fallback chunks that would look like a segmentation
    assert result.diagnostics["unreachable"] is True
    many = list(chunker.chunk_units(tale, tale.units))
    assert [r.chunks for r in many] == [[]] and many[0].error is not None


def test_openai_backend_marks_requests_the_model_never_saw(caplog) -> None:
    fast = {"backoff_base_s": 0.01, "backoff_max_s": 0.02, "timeout_s": 5.0, "trust_env": False, "max_retries": 1}
    request = ChatRequest(messages=[{"role": "user", "content": "hello"}])
    with OpenAIChatModel("fake-model", base_urls=[closed_port_url()], **fast) as model:
        assert model.chat(request).error_kind == UNAVAILABLE
    with FakeOpenAIServer(fault_plan=lambda body, attempt: "500") as srv, \
            OpenAIChatModel("fake-model", base_urls=[srv.base_url], **fast) as model:
        out = model.chat(request)
        assert out.error_kind == UNAVAILABLE and "HTTP 500" in out.error
        srv.fault_plan = lambda body, attempt: "401"
        assert model.chat(request).error_kind == UNAVAILABLE
        srv.fault_plan = lambda body, attempt: "400"  # the request's own problem: a plain error
        out = model.chat(request)
        assert out.error is not None and out.error_kind is None


def test_openai_start_up_check(caplog) -> None:
    dead = closed_port_url()
    with pytest.raises(ModelUnavailable, match="no server answers") as info:
        OpenAIChatModel("fake-model", base_urls=[dead], trust_env=False).check()
    assert "\n" not in str(info.value) and dead in str(info.value)
    with FakeOpenAIServer(model="served-model") as srv:
        with pytest.raises(ModelUnavailable, match=r"'fake-model' is not among the models the server lists \(served-model\)"):
            OpenAIChatModel("fake-model", base_urls=[srv.base_url], trust_env=False).check()
        OpenAIChatModel("served-model", base_urls=[srv.base_url], trust_env=False).check()
        OpenAIChatModel("fake-model", base_urls=[srv.base_url], trust_env=False, startup_check=False).check()
        with caplog.at_level(logging.WARNING, logger="litseg.llm.openai_backend"):
            OpenAIChatModel("served-model", base_urls=[dead, srv.base_url], trust_env=False).check()
        assert "1 of 2 servers do not answer" in caplog.text


# LitSeg-Lite on a served model (the fake server answers as a single-pass teacher would).
LITE = ["method=litseg_lite", "prompt=litseg_lite_compact"]


def test_a_server_that_stops_answering_fails_units_and_the_rerun_does_them(tmp_path: Path) -> None:
    """The run exits 1 naming the failed units, keeps none of their chunks, spent no feedback turn
    on them; a rerun against a working server completes the run (before: exit 0, every unit
    "done" with whole-unit fallback chunks that the rerun then skipped for good)."""
    run = tmp_path / "run"
    with FakeOpenAIServer(lambda body: teacher_answer(body["messages"]),
                          fault_plan=lambda body, attempt: "503") as srv:
        proc = run_script("annotate.py", *LITE, "llm=openai", f"llm.base_urls={srv.base_url}", *FAST_CLIENT,
                          f"input={DEMO}", f"hydra.run.dir={run}", "print_table=0", "view=false")
        requests = srv.stats.requests
        assert proc.returncode == 1, proc.stderr[-3000:]
        out = proc.stdout + proc.stderr
        for unit in ("0001", "0002", "0003"):
            assert f"failed: the-two-lanterns/{unit}: model unreachable: HTTP 503" in out
        assert read_jsonl(run / LEDGER) == [] and read_jsonl(run / CHUNKS) == []
        failures = read_jsonl(run / FAILURES)
        assert len(failures) == 3 and all("HTTP 503" in f["error"] and f["n_chunks"] == 0 for f in failures)
        summary = json.loads((run / SUMMARY).read_text())
        assert (summary["units"], summary["units_failed"], summary["chunks_total_in_dir"]) == (0, 3, 0)
        # One request per unit, tried 1 + llm.max_retries times by the backend, and never again
        # with a correction request.
        assert requests == 3 * 2
        assert all(len(b["messages"]) == 2 for b in srv.stats.bodies)

        srv.fault_plan = None  # the server is back
        again = run_annotate(compose(*LITE, "llm=openai", f"llm.base_urls={srv.base_url}", *FAST_CLIENT, f"input={DEMO}"),
                             run)
    assert (again["units"], again["units_failed"], again["units_skipped"]) == (3, 0, 0)
    assert again["fallbacks"] == {"none": 3}
    assert {(r["unit_id"]) for r in read_jsonl(run / LEDGER)} == {"0001", "0002", "0003"}


def test_an_unreachable_server_stops_the_run_at_start_in_one_line(tmp_path: Path) -> None:
    t0 = time.monotonic()
    proc = run_script("annotate.py", "llm=openai", f"llm.base_urls=[{closed_port_url()}]", f"input={DEMO}",
                      f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == SETUP_EXIT, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no server answers" in errors[0] and "Traceback" not in proc.stderr
    assert not read_jsonl(tmp_path / "run" / LEDGER)
    assert time.monotonic() - t0 < 120  # before: 161 s of retries, then exit 0


def test_a_model_that_cannot_load_stops_the_run_once_not_per_unit(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{not json")  # passes the look, fails the load
    cfg = compose("llm=transformers", f"llm.model={folder}", "llm.cache.enabled=false", f"input={DEMO}")
    with pytest.raises(ModelUnavailable, match="cannot load"):
        run_annotate(cfg, tmp_path / "run")
    assert not (tmp_path / "run" / FAILURES).exists() or read_jsonl(tmp_path / "run" / FAILURES) == []


# ---------------------------------------------------------------- item 3: one setup per run folder
def test_a_run_folder_refuses_another_setup(tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = run_annotate(compose("method=recursive", f"input={DEMO}"), run)
    chunks_before = (run / CHUNKS).read_bytes()
    assert json.loads((run / SETUP).read_text())["fingerprint"]["name"] == "recursive"

    with pytest.raises(RunSetupMismatch) as info:
        run_annotate(compose("method=token", f"input={DEMO}"), run)
    message = str(info.value)
    assert "\n" not in message and "method: 'recursive' before, 'token' now" in message
    assert "unit_key" in message and "+new_dir=true" in message
    with pytest.raises(RunSetupMismatch, match="chunk_size: 1000 before, 500 now"):
        run_annotate(compose("method=recursive", "method.chunk_size=500", f"input={DEMO}"), run)
    with pytest.raises(RunSetupMismatch, match="preprocess.max_words: 2000 before, 800 now"):
        run_annotate(compose("method=recursive", "preprocess.max_words=800", f"input={DEMO}"), run)
    assert (run / CHUNKS).read_bytes() == chunks_before  # nothing was appended

    same = run_annotate(compose("method=recursive", f"input={DEMO}"), run)  # the same setup resumes
    assert same["units_skipped"] == first["units"] and same["units"] == 0

    result = annotate_task(compose("method=token", f"input={DEMO}", "+new_dir=true"), run)
    moved = result.summary
    assert moved["method"] == "token" and (tmp_path / "run-2" / CHUNKS).exists()
    assert result.run_dir == tmp_path / "run-2"  # the exit line names the folder written, not the planned one
    assert (run / CHUNKS).read_bytes() == chunks_before
    assert {c["method"] for c in read_jsonl(tmp_path / "run-2" / CHUNKS)} == {"token"}

    # A folder written before setup.json existed is judged by its run summary.
    (run / SETUP).unlink()
    with pytest.raises(RunSetupMismatch, match="method: 'recursive' before, 'token' now"):
        run_annotate(compose("method=token", f"input={DEMO}"), run)

    restarted = run_annotate(compose("method=token", f"input={DEMO}", "resume=false"), run)
    assert restarted["units"] == first["units"]
    assert {c["method"] for c in read_jsonl(run / CHUNKS)} == {"token"}


def test_prompt_and_model_are_part_of_the_setup(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus", books=1, chapters=1, sentences=6)
    book = next(corpus.iterdir())

    def lite(name: str = "scripted", version: str | None = None) -> LitSegLiteChunker:
        prompt = dataclasses.replace(LITE_PROMPT, version=version or LITE_PROMPT.version)
        return LitSegLiteChunker(ScriptedChatModel(lambda r: teacher_answer(r.messages), name=name), prompt)

    run = tmp_path / "run"
    done = annotate(inputs=[book], chunker=lite(), out_dir=run, prepare=prepare_document, progress=False)
    assert done["units"] == 1
    with pytest.raises(RunSetupMismatch, match=r"model\.name: 'scripted' before, 'other-model' now"):
        annotate(inputs=[book], chunker=lite(name="other-model"), out_dir=run, prepare=prepare_document,
                 progress=False)
    with pytest.raises(RunSetupMismatch, match="prompt: .* before, 'lite-v999' now"):
        annotate(inputs=[book], chunker=lite(version="lite-v999"), out_dir=run, prepare=prepare_document,
                 progress=False)
    assert len(read_jsonl(run / LEDGER)) == 1


def test_a_folder_without_units_takes_any_setup(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with pytest.raises(SetupError):  # stopped at start: nothing committed
        run_annotate(compose("method=token", "method.chunk_size=abc", f"input={DEMO}"), run)
    (run / SETUP).parent.mkdir(parents=True, exist_ok=True)
    (run / SETUP).write_text(json.dumps({"fingerprint": {"name": "recursive"}, "preprocess": {}}))
    summary = run_annotate(compose("method=token", f"input={DEMO}"), run)
    assert summary["units"] == 3 and json.loads((run / SETUP).read_text())["fingerprint"]["name"] == "token"


# ---------------------------------------------------------------- item 4: one line, exit code 2
def test_parameters_of_the_wrong_type_are_named() -> None:
    with pytest.raises(ConfigValueError, match=r"chunk_size must be an integer, got 'abc'"):
        build_chunker_from_config({"name": "token", "chunk_size": "abc"})
    with pytest.raises(ConfigValueError, match=r"max_retries must be an integer, got True"):
        build_chunker_from_config({"name": "litseg_lite", "max_retries": True},
                                  llm={"backend": "scripted", "answers": ["x"]}, prompt=LITE_PROMPT)
    with pytest.raises(ConfigValueError, match=r"chunk_size must be an integer, got 5.5"):
        build_chunker_from_config({"name": "token", "chunk_size": 5.5})
    # The chunker's own refusal of a value is a config error too, named after the method.
    with pytest.raises(ConfigValueError, match=r"method 'token': token splitter: chunk_size must be >= 1"):
        build_chunker_from_config({"name": "token", "chunk_size": 0})
    # An int where a float is declared is fine; so is null where None is allowed.
    assert build_chunker_from_config({"name": "token", "chunk_size": 64, "overlap": 0}).name == "token"


def _holding_lock(run: Path) -> RunStore:
    return RunStore(run).open()


@pytest.mark.parametrize("case", ["missing_input", "bad_type", "missing_model", "lock_held", "other_setup",
                                  "full_error"])
def test_annotate_turns_known_errors_into_one_line_and_exit_code_2(case: str, tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = [f"hydra.run.dir={run}", "print_table=0"]
    env = ENV
    store = None
    expected = {"missing_input": "input is missing", "bad_type": "chunk_size must be an integer, got 'abc'",
                "missing_model": "model directory /nonexistent/model does not exist",
                "lock_held": "is being written by another process",
                "other_setup": "holds a run of another setup (method: 'recursive' before, 'token' now)"}.get(case)
    if case == "missing_input":
        args += ["method=recursive"]
    elif case in ("bad_type", "full_error"):
        args += ["method=token", "method.chunk_size=abc", f"input={DEMO}"]
        if case == "full_error":
            env = {**ENV, "HYDRA_FULL_ERROR": "1"}
    elif case == "missing_model":
        args += ["llm=transformers", "llm.model=/nonexistent/model", f"input={DEMO}"]
    elif case == "lock_held":
        store = _holding_lock(run)
        args += ["method=recursive", f"input={DEMO}"]
    else:
        run_annotate(compose("method=recursive", f"input={DEMO}"), run)
        args += ["method=token", f"input={DEMO}"]
    try:
        proc = run_script("annotate.py", *args, env=env)
    finally:
        if store is not None:
            store.close()
    if case == "full_error":
        assert proc.returncode not in (0, SETUP_EXIT) and "Traceback" in proc.stderr
        assert "chunk_size must be an integer" in proc.stderr
        return
    assert proc.returncode == SETUP_EXIT, proc.stderr[-3000:]
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and expected in errors[0], lines[-5:]
    assert "Traceback" not in proc.stderr and len(lines) <= 3, lines


def test_train_turns_known_errors_into_one_line(tmp_path: Path) -> None:
    train = run_script("train.py", "+experiment=sft", "model=smollm2_135m", "data.runs=[/nonexistent/run]",
                       f"hydra.run.dir={tmp_path / 't'}")
    assert train.returncode == SETUP_EXIT, train.stderr[-3000:]
    errors = [line for line in train.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "/nonexistent/run is not an annotate run directory" in errors[0]
    assert "Traceback" not in train.stderr


def test_evaluate_turns_known_errors_into_one_line(tmp_path: Path) -> None:
    shared_data_dir()  # suite=smoke reads FairytaleQA from the shared data
    evaluate = run_script("evaluate.py", "suite=smoke", "chunkers=[token]", "chunkers.token.chunk_size=abc",
                          "retrieval.embedder.model=hashing", "report.plots=false",
                          f"hydra.run.dir={tmp_path / 'e'}")
    assert evaluate.returncode == SETUP_EXIT, evaluate.stderr[-3000:]
    errors = [line for line in evaluate.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "chunk_size must be an integer, got 'abc'" in errors[0]
    assert "Traceback" not in evaluate.stderr


def test_setup_errors_are_not_recorded_per_unit(tmp_path: Path) -> None:
    """A backend that cannot serve raises once through the batch machinery, not once per unit."""
    calls = {"batch": 0, "one": 0}

    class Broken(ScriptedChatModel):
        def chat_batch(self, requests: list[ChatRequest]) -> list[Completion]:
            calls["batch"] += 1
            raise ModelUnavailable("transformers backend: cannot load /m: OSError: no weights")

        def chat(self, request: ChatRequest) -> Completion:  # the one-by-one retry of a broken batch
            calls["one"] += 1
            return super().chat(request)

    corpus = write_corpus(tmp_path / "corpus", books=2, chapters=2, sentences=6)
    chunker = LitSegLiteChunker(Broken(["x"], cycle=True), LITE_PROMPT, workers=4)
    with pytest.raises(ModelUnavailable, match="cannot load"):
        annotate(inputs=sorted(corpus.iterdir()), chunker=chunker, out_dir=tmp_path / "run",
                 prepare=prepare_document, progress=False)
    assert calls["batch"] >= 1 and calls["one"] == 0  # not asked request by request, unit by unit
    assert read_jsonl(tmp_path / "run" / FAILURES) == [] and read_jsonl(tmp_path / "run" / LEDGER) == []


def test_known_errors_through_run_task(monkeypatch: pytest.MonkeyPatch) -> None:
    def fails() -> None:
        raise ModelUnavailable("openai backend: no server answers (http://x: refused)\nsecond line")

    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    stopped = run_task(fails)
    assert (stopped.exit_code, stopped.run_dir, stopped.summary) == (SETUP_EXIT, "", {})
    assert exit_line("annotate", [stopped]) == "error: openai backend: no server answers (http://x: refused) second line"

    def bug() -> None:
        raise KeyError("a bug keeps its traceback")

    with pytest.raises(KeyError):
        run_task(bug)
    cfg = OmegaConf.create({"input": "???"})
    assert "input is missing" in run_task(lambda: cfg.input).reason
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    with pytest.raises(ModelUnavailable):
        run_task(fails)
