"""SFT and GRPO datasets from the teacher's annotate run directories.

One example per annotated unit: the prompt is exactly what the student sees at inference (the
single-pass prompt rendered by :func:`~litseg.chunkers.llm_common.render_single_pass_messages`),
the target is the teacher's validated segmentation with its summarised workflow, written in the
answer schema that prompt asks for (the LitSeg-Lite schema, or an ablation's). Units are read
from ``diagnostics.jsonl`` (the ledger: final ``segments``, the chosen ``answer``, and for the
three-stage teacher its ``stages``) and ``sentences.jsonl`` (the unit's sentence texts).

Splits are drawn by book, never by unit, so no chapter of a validation book leaks into training.
Examples whose prompt or answer exceeds the configured token lengths are dropped; every dropped
unit is counted under its reason in the :class:`DataReport`.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import random
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from litseg.chunkers.llm_common import number_sentences, render_single_pass_messages
from litseg.chunkers.groups import SinglePassPrompt, WriterPrompt
from litseg.utils.config import ConfigError
from litseg.utils.jsonl import iter_jsonl, read_jsonl
from litseg.segmentation.parsing import parse_answer
from litseg.segmentation.schema import Segment, get_schema
from litseg.segmentation.validation import blocking_issues, validate_segments
from litseg.training.splits import assign_books, load_book_split
from litseg.training.writer_data import build_writer_examples

log = logging.getLogger(__name__)

SPLITS = ("train", "validation", "test")


@dataclass
class TeacherUnit:
    """One annotated unit read back from a run directory."""

    book_id: str
    unit_id: str
    key: str
    run_dir: str
    sentences: list[str]
    segments: list[dict[str, Any]]
    workflow: dict[str, Any]  # step_1_events, step_2_threads, chapter_title, step_3_turning_points
    paragraph_starts: list[bool] | None = None  # from sentences.jsonl's `para` (None: not recorded)

    @property
    def n_sentences(self) -> int:
        return len(self.sentences)


@dataclass
class DataReport:
    """What the builder read, kept and dropped (and why); written as data_report.json."""

    runs: list[str] = field(default_factory=list)
    units_read: int = 0
    dropped: Counter[str] = field(default_factory=Counter)  # reason -> units
    examples: dict[str, int] = field(default_factory=dict)
    books: dict[str, list[str]] = field(default_factory=dict)
    prompt_tokens: dict[str, float] = field(default_factory=dict)
    completion_tokens: dict[str, float] = field(default_factory=dict)
    schema: str = ""
    prompt_version: str = ""

    @property
    def kept(self) -> int:
        return sum(self.examples.values())

    def drop(self, reason: str, n: int = 1) -> None:
        self.dropped[reason] += n

    def n_examples(self, split: str) -> int:
        """Examples kept in ``split`` (0: no such split, e.g. too few books for it)."""
        return self.examples[split] if split in self.examples else 0

    def longest_completion(self) -> int | None:
        """The longest teacher answer in tokens (None when no example was kept)."""
        return int(self.completion_tokens["max"]) or None if "max" in self.completion_tokens else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "dropped": dict(self.dropped), "kept": self.kept,
                "dropped_total": sum(self.dropped.values())}

    def summary(self) -> str:
        drops = ", ".join(f"{k}: {v}" for k, v in sorted(self.dropped.items())) or "none"
        splits = ", ".join(f"{k} {v} ({len(self.books.get(k, []))} books)" for k, v in self.examples.items())
        return f"{self.units_read} units read; kept {splits}; dropped {drops}"


# --------------------------------------------------------------------------------------------
# Reading run directories


def expand_runs(patterns: Iterable[str]) -> list[Path]:
    """Run directories named by ``patterns`` (paths or globs); each must hold diagnostics.jsonl."""
    found: list[Path] = []
    for pattern in patterns:
        matches = sorted(glob.glob(str(Path(pattern).expanduser()))) or [pattern]
        for m in matches:
            path = Path(m)
            if not (path / "diagnostics.jsonl").is_file():
                raise FileNotFoundError(f"{path} is not an annotate run directory (no diagnostics.jsonl)")
            if path not in found:
                found.append(path)
    return found


#: Methods whose runs hold a teacher's segmentations: the three-stage teacher, imported annotations,
#: a single-pass teacher (litseg_lite on a capable model) and the smoke runs' scripted teacher.
TEACHER_METHODS = ("litseg", "imported", "litseg_lite", "synthetic_teacher")


def check_teacher_runs(run_dirs: Iterable[Path]) -> None:
    """Refuse runs of a chunker that is not a teacher (a baseline's run has no segmentations to
    learn: every unit would be dropped as ``segments_invalid``). The method is read from
    ``run_summary.json``, else from the first chunk; a run that records neither is let through."""
    wrong = []
    for run in run_dirs:
        method = None
        if (run / "run_summary.json").is_file():
            method = json.loads((run / "run_summary.json").read_text(encoding="utf-8")).get("method")
        elif (run / "chunks.jsonl").is_file():
            method = next(iter_jsonl(run / "chunks.jsonl"), {}).get("method")
        if method is not None and method not in TEACHER_METHODS:
            wrong.append(f"{run} (method={method})")
    if wrong:
        raise ValueError(f"not a teacher run: {', '.join(wrong)}; training data comes from runs of "
                         f"{' | '.join(TEACHER_METHODS)} (annotate.py method=litseg, or method=imported)")


def _workflow(row: Mapping[str, Any]) -> dict[str, Any]:
    """The teacher's reasoning: each stage's answer of the three-stage teacher, else the parsed
    single-pass ``answer``.

    The three-stage teacher writes ``stages.stageK.answer`` (what the model answered, or None);
    stage 3's answer holds the title and the turning points.
    """
    stages = row.get("stages") or {}
    if stages:
        s1, s2, s3 = ((stages.get(k) or {}).get("answer") or {} for k in ("stage1", "stage2", "stage3"))
        return {
            "step_1_events": str(s1.get("step_1_events") or ""),
            "step_2_threads": str(s2.get("step_2_threads") or ""),
            "chapter_title": str(s3.get("chapter_title") or ""),
            "step_3_turning_points": list(s3.get("step_3_turning_points") or []),
        }
    answer = row.get("answer") or {}
    step1, step2, step3 = (answer.get(k) or {} for k in ("step1", "step2", "step3"))
    return {
        "step_1_events": _answer_field(step1, "step_1_events"),
        "step_2_threads": _answer_field(step2, "step_2_threads"),
        "chapter_title": _answer_field(step3 if "chapter_title" in step3 else answer, "chapter_title"),
        "step_3_turning_points": list(step3.get("step_3_turning_points") or []),
    }


def _answer_field(part: Mapping[str, Any], key: str) -> Any:
    """A field of the parsed single-pass answer (the model's own JSON): one it left out reads as
    empty text, anything else as written."""
    return part[key] if key in part else ""


@dataclass(frozen=True)
class LedgerRow:
    """The fields of a ``diagnostics.jsonl`` row the builder reads. annotate.py writes ``key`` (the
    store), ``book_id``, ``unit_id`` and ``fallback`` (``none`` | ``repair`` | ``whole_unit``) on
    every row; ``error`` is set on a failed unit only; ``n_sentences`` and ``segments`` (the final
    answer) are absent for a chunker that has none."""

    key: str
    book_id: str
    unit_id: str
    fallback: str
    error: Any
    n_sentences: int | None
    segments: list[Any]

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> LedgerRow:
        return cls(key=str(row["key"]), book_id=str(row["book_id"]), unit_id=str(row["unit_id"]),
                   fallback=str(row["fallback"]), error=row.get("error"), n_sentences=row.get("n_sentences"),
                   segments=list(row.get("segments") or []))


def read_teacher_units(run_dir: str | Path, report: DataReport, *, drop_fallbacks: Sequence[str] = ("whole_unit",),
                       min_sentences: int = 2) -> list[TeacherUnit]:
    """Usable annotated units of one run directory; the others are counted in ``report``."""
    run = Path(run_dir)
    texts: dict[str, dict[int, str]] = {}
    paras: dict[str, dict[int, bool]] = {}
    # sentences.jsonl rows (annotate's sentence_rows + the store's unit_key): idx, text, and
    # para (whether the sentence opens a paragraph) in runs made since it was recorded.
    for s in read_jsonl(run / "sentences.jsonl"):
        texts.setdefault(str(s["unit_key"]), {})[int(s["idx"])] = str(s["text"])
        if "para" in s:
            paras.setdefault(str(s["unit_key"]), {})[int(s["idx"])] = bool(s["para"])
    units: list[TeacherUnit] = []
    for raw in read_jsonl(run / "diagnostics.jsonl"):
        report.units_read += 1
        row = LedgerRow.of(raw)
        key = row.key
        if row.error:
            report.drop("teacher_error")
            continue
        if row.fallback in drop_fallbacks:
            report.drop(f"teacher_fallback_{row.fallback}")
            continue
        by_idx = texts.get(key, {})
        n = len(by_idx)
        if n == 0 or sorted(by_idx) != list(range(1, n + 1)) or (row.n_sentences not in (None, n)):
            report.drop("sentences_missing")
            continue
        if n < min_sentences:
            report.drop("too_few_sentences")
            continue
        try:
            segments = [Segment.model_validate(s) for s in row.segments]
        except (ValueError, TypeError):
            report.drop("segments_unreadable")
            continue
        if not segments or blocking_issues(validate_segments(segments, n)):
            report.drop("segments_invalid")
            continue
        units.append(TeacherUnit(
            book_id=row.book_id, unit_id=row.unit_id, key=key,
            run_dir=str(run), sentences=[by_idx[i] for i in range(1, n + 1)],
            segments=[s.model_dump() for s in segments], workflow=_workflow(raw),
            paragraph_starts=[paras[key][i] for i in range(1, n + 1)] if len(paras.get(key, {})) == n else None))
    return units


# --------------------------------------------------------------------------------------------
# Targets


def teacher_target(unit: TeacherUnit, schema: str) -> str:
    """The teacher's answer written in ``schema`` (compact JSON, the prompt's key order).

    The full Lite shape is built first, with the segment list and title also at the root for the
    schemas that keep them there; the schema model then keeps exactly its own fields (extra keys
    are ignored by the answer models), so every ablation gets the same teacher content minus
    what its prompt leaves out. The separators match what grammar-constrained decoding writes.
    """
    wf = unit.workflow
    step3 = {"chapter_title": wf["chapter_title"], "step_3_turning_points": wf["step_3_turning_points"],
             "segments": unit.segments}
    full = {
        "step1": {"step_1_events": wf["step_1_events"]},
        "step2": {"step_2_threads": wf["step_2_threads"]},
        "step3": step3,
        "chapter_title": wf["chapter_title"],
        "segments": unit.segments,
    }
    answer = get_schema(schema).model_validate(full)
    return json.dumps(answer.model_dump(), ensure_ascii=False)


def check_target(text: str, schema: str, n: int) -> None:
    """A target must read back strictly, with a valid segmentation (guards the reformatting)."""
    parsed = parse_answer(text, get_schema(schema))
    if not parsed.strict_ok:
        raise ValueError(f"target does not read back strictly under schema {schema!r}: "
                         f"{[e.message for e in parsed.errors] + parsed.notes}")
    if blocking_issues(validate_segments(parsed.segments, n)):
        raise ValueError("target segmentation is not valid")


# --------------------------------------------------------------------------------------------
# Splits


def split_books(book_ids: Iterable[str], *, val_fraction: float, test_fraction: float, seed: int) -> dict[str, str]:
    """Assign each book to train / validation / test, deterministically from ``seed``.

    A split with a positive fraction gets at least one book whenever that still leaves one for
    training; with a single book everything trains.
    """
    books = sorted(set(book_ids), key=lambda b: hashlib.sha256(f"{seed}:{b}".encode()).hexdigest())
    n = len(books)

    def count(fraction: float, left: int) -> int:
        if fraction <= 0 or left <= 1:
            return 0
        return min(left - 1, max(1, round(fraction * n)))

    n_test = count(test_fraction, n)
    n_val = count(val_fraction, n - n_test)
    out: dict[str, str] = {}
    for i, book in enumerate(books):
        out[book] = "test" if i < n_test else "validation" if i < n_test + n_val else "train"
    return out


# --------------------------------------------------------------------------------------------
# Token lengths


def _template_ids(tokenizer: Any, messages: list[dict[str, str]], *, add_generation_prompt: bool,
                   chat_template_kwargs: Mapping[str, Any] | None = None) -> list[int]:
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tokenize=True,
                                        **dict(chat_template_kwargs or {}))
    if isinstance(ids, Mapping) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return list(ids)


def token_lengths(tokenizer: Any, prompt: list[dict[str, str]], completion: str,
                  chat_template_kwargs: Mapping[str, Any] | None = None) -> tuple[int, int]:
    """(prompt tokens with the generation header, answer tokens incl. the end-of-turn marker)."""
    p = len(_template_ids(tokenizer, prompt, add_generation_prompt=True, chat_template_kwargs=chat_template_kwargs))
    full = len(_template_ids(tokenizer, [*prompt, {"role": "assistant", "content": completion}],
                             add_generation_prompt=False, chat_template_kwargs=chat_template_kwargs))
    return p, max(1, full - p)


def _stats(values: Sequence[int]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    return {"min": ordered[0], "median": float(statistics.median(ordered)),
            "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], "max": ordered[-1]}


# --------------------------------------------------------------------------------------------
# The builder


def build_examples(units: Sequence[TeacherUnit], prompt: SinglePassPrompt, tokenizer: Any, *,
                   max_prompt_tokens: int, max_completion_tokens: int, max_total_tokens: int,
                   length_reference: Mapping[str, Any] | None, report: DataReport,
                   chat_template_kwargs: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Chat-format rows (``prompt``, ``completion`` and the reward columns) of the kept units."""
    schema = prompt.schema
    rows: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for unit in units:
        ident = (unit.book_id, unit.unit_id)
        if ident in seen:
            report.drop("duplicate_unit")
            continue
        seen.add(ident)
        if prompt.paragraph_breaks and unit.paragraph_starts is None:
            report.drop("paragraphs_unknown")  # the run predates the `para` field: rerun or re-import it
            continue
        messages = render_single_pass_messages(prompt, unit.sentences, length_reference, unit.paragraph_starts)
        target = teacher_target(unit, schema)
        check_target(target, schema, unit.n_sentences)
        p_len, c_len = token_lengths(tokenizer, messages, target, chat_template_kwargs)
        if p_len > max_prompt_tokens:
            report.drop("prompt_too_long")
            continue
        if c_len > max_completion_tokens:
            report.drop("completion_too_long")
            continue
        if p_len + c_len > max_total_tokens:
            report.drop("total_too_long")
            continue
        rows.append({
            "prompt": messages,
            "completion": [{"role": "assistant", "content": target}],
            "reference": target,
            "chapter": number_sentences(unit.sentences),
            "n_sentences": unit.n_sentences,
            "schema": schema,
            "book_id": unit.book_id,
            "unit_id": unit.unit_id,
            "prompt_tokens": p_len,
            "completion_tokens": c_len,
        })
    return rows


def build_datasets(data_cfg: Any, prompt: SinglePassPrompt | WriterPrompt, tokenizer: Any, *,
                   runs: Sequence[str | Path] | None = None,
                   chat_template_kwargs: Mapping[str, Any] | None = None) -> tuple[Any, DataReport]:
    """The ``datasets.DatasetDict`` (train / validation / test, empty splits left out) and its report.

    ``data_cfg`` is a :class:`~litseg.training.config.DataConfig`; ``runs`` overrides its run list
    (used when the synthetic run was just made).
    """
    from datasets import Dataset, DatasetDict

    report = DataReport(schema=prompt.schema, prompt_version=prompt.version)
    run_dirs = expand_runs(runs if runs is not None else data_cfg.runs)
    if not run_dirs:
        raise ConfigError("no annotate run directories given: set data.runs=[outputs/annotate/...] "
                          "(or data.synthetic=true for a smoke run)")
    check_teacher_runs(run_dirs)
    report.runs = [str(r) for r in run_dirs]
    units: list[TeacherUnit] = []
    for run in run_dirs:
        units.extend(read_teacher_units(run, report, drop_fallbacks=data_cfg.drop_fallbacks,
                                        min_sentences=data_cfg.min_sentences))
    if isinstance(prompt, WriterPrompt):  # LitSeg-Tagger's writer: one example per teacher block
        rows = build_writer_examples(units, prompt, tokenizer, report=report, token_lengths=token_lengths,
                                     chat_template_kwargs=chat_template_kwargs,
                                     max_prompt_tokens=data_cfg.max_prompt_tokens,
                                     max_completion_tokens=data_cfg.max_completion_tokens)
    else:
        rows = build_examples(units, prompt, tokenizer, max_prompt_tokens=data_cfg.max_prompt_tokens,
                              max_completion_tokens=data_cfg.max_completion_tokens,
                              max_total_tokens=data_cfg.max_total_tokens,
                              length_reference=data_cfg.length_reference, report=report,
                              chat_template_kwargs=chat_template_kwargs)
    if not rows:
        raise ValueError(f"no training example left: {report.summary()}")
    assignment = book_assignment(data_cfg, (r["book_id"] for r in rows))
    by_split: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    for r in rows:
        where = assignment[r["book_id"]]
        if where == "excluded":
            report.drop("book_excluded_by_split")
            continue
        by_split[where].append(r)
    if data_cfg.max_examples is not None:
        for s in SPLITS:
            extra = len(by_split[s]) - data_cfg.max_examples
            if extra > 0:
                report.drop(f"over_max_examples_{s}", extra)
                # a seeded draw over every book, in the original order (not the first books only)
                keep = sorted(random.Random(data_cfg.split_seed).sample(range(len(by_split[s])), data_cfg.max_examples))
                by_split[s] = [by_split[s][i] for i in keep]
    report.examples = {s: len(v) for s, v in by_split.items() if v}
    report.books = {s: sorted({r["book_id"] for r in v}) for s, v in by_split.items() if v}
    kept = [r for v in by_split.values() for r in v]
    report.prompt_tokens = _stats([r["prompt_tokens"] for r in kept])
    report.completion_tokens = _stats([r["completion_tokens"] for r in kept])
    log.info("training data: %s", report.summary())
    return DatasetDict({s: Dataset.from_list(v) for s, v in by_split.items() if v}), report


def book_assignment(data_cfg: Any, book_ids: Iterable[str]) -> dict[str, str]:
    """Each book's split: from the fixed split file (``data.split``), else drawn by fractions."""
    if data_cfg.split:
        return assign_books(book_ids, load_book_split(data_cfg.split))
    return split_books(book_ids, val_fraction=data_cfg.val_fraction, test_fraction=data_cfg.test_fraction,
                       seed=data_cfg.split_seed)


def teacher_units_by_split(data_cfg: Any, runs: Sequence[str | Path], report: DataReport) -> dict[str, list[TeacherUnit]]:
    """The usable teacher units of ``runs`` by split (books of ``excluded`` left out, counted)."""
    run_dirs = expand_runs(runs)
    if not run_dirs:
        raise ValueError("no annotate run directories given: set data.runs=[outputs/annotate/...]")
    check_teacher_runs(run_dirs)
    units: list[TeacherUnit] = []
    for run in run_dirs:
        units.extend(read_teacher_units(run, report, drop_fallbacks=data_cfg.drop_fallbacks,
                                        min_sentences=data_cfg.min_sentences))
    assignment = book_assignment(data_cfg, (u.book_id for u in units))
    out: dict[str, list[TeacherUnit]] = {s: [] for s in SPLITS}
    for u in units:
        where = assignment[u.book_id]
        if where == "excluded":
            report.drop("book_excluded_by_split")
            continue
        out[where].append(u)
    return out


def write_report(report: DataReport, path: str | Path) -> None:
    Path(path).write_text(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
