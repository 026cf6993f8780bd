"""Worst-case model replies through the reply path: bounded work, measured on one core.

Each case is an adversarial reply of about 1 MB (the cap the parser reads is 1,000,000
characters), built to hit one of the super-linear paths found by fuzzing: unclosed ``<think>``
tags, 1 MB of ``{``, deep nesting, a 40-character context string that expands to 50,000 indices,
50,000 repeated context indices, 5,000-digit integers, 64+ bracketed sentence echoes before the
answer, broken objects that json_repair would mend one by one, a 1 MB answer cut at the token
limit, tens of thousands of segments, every prefix range of the unit (n chunks of nearly the whole unit
without the spread limit), lone surrogates, a 200 KB bad value. Every case runs the
whole reply path for a unit of ``--sentences`` sentences:

    parse_answer(reply, LiteAnswer, n=n) -> validate_segments -> feedback_message
    -> repair_segments -> build_chunks

and the table gives the CPU (process) time of the slowest of ``--repeat`` runs, the size of the
correction request the model would get back, and the chunks built.

Run (one core):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/reply_bounds.py            # prints the table
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/reply_bounds.py --write

``--write`` puts the table into the generated block ``reply_bounds`` of docs/robustness.md. The script exits
with status 1 when any case takes 1 s or more.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from litseg.segmentation.parsing import MAX_REPLY_CHARS, parse_answer  # noqa: E402
from litseg.segmentation.reconstruct import build_chunks  # noqa: E402
from litseg.segmentation.repair import repair_segments  # noqa: E402
from litseg.segmentation.schema import LiteAnswer  # noqa: E402
from litseg.segmentation.types import Document, Sentence, Unit  # noqa: E402
from litseg.segmentation.validation import feedback_message, validate_segments  # noqa: E402
from litseg.utils.docblocks import write_block  # noqa: E402

DOCS = REPO / "docs" / "robustness.md"
BLOCK = "reply_bounds"
MB = 1_000_000
LIMIT_S = 1.0


def unit_document(n: int) -> tuple[Document, Unit]:
    text, spans = "", []
    for i in range(1, n + 1):
        sentence = f"Sentence number {i} tells of the keeper and the lamp."
        spans.append((len(text), len(text) + len(sentence)))
        text += sentence + " "
    doc = Document(book_id="bench", text=text)
    unit = Unit(book_id="bench", unit_id="u1", index=0, start=0, end=len(text), title="U",
                sentences=[Sentence(i + 1, a, b) for i, (a, b) in enumerate(spans)])
    doc.units.append(unit)
    return doc, unit


def lite(segments: list[dict] | str) -> str:
    body = segments if isinstance(segments, str) else json.dumps(segments)
    return ('{"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"}, '
            '"step3": {"chapter_title": "c", "step_3_turning_points": [], "segments": ' + body + "}}")


def fill(unit: str, size: int = MB) -> str:
    return unit * (size // len(unit))


def cases(n: int) -> dict[str, Callable[[], str]]:
    valid = lite([{"subtitle": "a", "from_idx": 1, "to_idx": n, "context_idx": []}])
    return {
        "1 MB of `{`": lambda: "{" * MB,
        "1 MB of `[`": lambda: "[" * MB,
        "140k unclosed `<think>` tags": lambda: fill("<think>"),
        "`<think>` blocks, then the answer": lambda: fill("<think>x</think>", MB - len(valid)) + valid,
        "nesting `{\"a\":` x 100k": lambda: fill('{"a": '),
        "context `1-9999 ...` (40 chars -> 50k)": lambda: lite(
            [{"subtitle": "a", "from_idx": 1, "to_idx": n, "context_idx": "1-9999 1-9999 1-9999 1-9999 1-9999"}]
            * (MB // 120)),
        "one context list of 500k indices": lambda: lite(
            '[{"subtitle": "a", "from_idx": 1, "to_idx": 2, "context_idx": [' + fill("3,", MB - 1000)[:-1] + "]}]"),
        "5,000-digit integers": lambda: lite(
            "[" + ",".join(['{"from_idx": ' + "9" * 5000 + ', "to_idx": "' + "8" * 5000 + '"}'] * 99) + "]"),
        "`[12] sentence` echoes, then the answer": lambda: fill("[12] The keeper lit the lamp. ",
                                                                 MB - len(valid)) + valid,
        "1 MB of small objects `{\"a\": 1}`": lambda: fill('{"a": 1} '),
        "1 MB of broken objects `{a b}`": lambda: fill("{a b} "),
        "broken objects, then the answer": lambda: fill("{a b} ", MB - len(valid)) + valid,
        "1 MB answer cut at the token limit": lambda: lite(
            [{"subtitle": "block", "from_idx": i % n + 1, "to_idx": i % n + 1, "context_idx": [1, 2]}
             for i in range(20_000)])[:MB],
        "14k overlapping segments": lambda: lite(
            [{"subtitle": "s", "from_idx": 1 + i % n, "to_idx": min(n, 1 + i % n + i // n), "context_idx": [1]}
             for i in range(14_000)]),
        "every prefix range, context naming the unit": lambda: lite(
            [{"from_idx": 1, "to_idx": n - k, "context_idx": f"1-{n}"} for k in range(n)]),
        "lone surrogates in every subtitle": lambda: lite(
            [{"subtitle": "\ud83d" * 40, "from_idx": 1, "to_idx": n}] * 3000),
        "200 KB bad value": lambda: lite([{"subtitle": "a", "from_idx": "x" * 200_000, "to_idx": n},
                                          {"subtitle": "b", "from_idx": 1, "to_idx": n, "context_idx": "y" * 200_000}]),
        "unquoted keys, negative values": lambda: "[" + fill("{from_idx:-1,to_idx:-2}, ", MB - 2) + "]",
        "escaped quotes `\\\"` x 500k": lambda: '{"a": "' + fill('\\"'),
        "1 MB of `[{`": lambda: fill("[{"),
        "reply over the cap (3 MB)": lambda: fill("x ", 3 * MB) + valid,
    }


def run_case(reply: str, doc: Document, unit: Unit) -> dict:
    n = unit.n_sentences
    words = [len(doc.sentence_text(s).split()) for s in unit.sentences]
    result = parse_answer(reply, LiteAnswer, n=n)
    issues = list(result.errors) + (validate_segments(result.segments, n) if result.value is not None else [])
    request = feedback_message(issues, n) if issues or result.value is None else ""
    segments, repairs = repair_segments(result.segments, n, sentence_words=words, max_words=400)
    chunks = build_chunks(doc, unit, segments, method="bench")
    return {"readable": result.value is not None, "segments_read": len(result.segments), "notes": len(result.notes),
            "feedback_chars": len(request), "chunks": len(chunks), "repairs": len(repairs)}


def measure(name: str, make: Callable[[], str], doc: Document, unit: Unit, repeat: int) -> dict:
    reply = make()
    worst = 0.0
    out: dict = {}
    for _ in range(repeat):
        t0 = time.process_time()
        out = run_case(reply, doc, unit)
        worst = max(worst, time.process_time() - t0)
    return {"case": name, "chars": len(reply), "cpu_s": worst, **out}


def markdown(rows: list[dict], n: int, repeat: int) -> str:
    lines = [f"Unit of {n} sentences; CPU seconds of the slowest of {repeat} runs on one core "
             f"({platform.processor() or platform.machine()}, Python {platform.python_version()}); "
             f"limit {LIMIT_S:.0f} s.", "",
             "| reply | characters | CPU s | readable | segments read | notes | feedback chars | chunks |",
             "|---|---:|---:|:-:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['chars']:,} | {r['cpu_s']:.3f} | {'yes' if r['readable'] else 'no'} "
                     f"| {r['segments_read']:,} | {r['notes']} | {r['feedback_chars']:,} | {r['chunks']} |")
    return "\n".join(lines)


def write_docs(table: str) -> None:
    write_block(DOCS, BLOCK, "benchmarks/reply_bounds.py --write", table)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sentences", type=int, default=300, help="sentences of the unit (default 300)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help="run the cases whose name contains this text")
    ap.add_argument("--write", "--write-docs", action="store_true", dest="write",
                    help=f"write the table into {DOCS.relative_to(REPO)}")
    args = ap.parse_args()
    if args.write and args.only:
        raise SystemExit("--write needs every case: no --only")
    doc, unit = unit_document(args.sentences)
    rows = []
    for name, make in cases(args.sentences).items():
        if args.only and args.only not in name:
            continue
        rows.append(measure(name, make, doc, unit, args.repeat))
        print(f"{rows[-1]['cpu_s']:7.3f} s  {name}", file=sys.stderr, flush=True)
    table = markdown(rows, args.sentences, args.repeat)
    print(table)
    if args.write:
        write_docs(table)
    assert MAX_REPLY_CHARS == MB
    return 1 if any(r["cpu_s"] >= LIMIT_S for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
