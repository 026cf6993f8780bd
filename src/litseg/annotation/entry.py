"""What ``annotate.py`` runs once Hydra has composed the config (kept out of the entry script so
that tests and notebooks can call it with a composed config).

:func:`run_annotate` reads top to bottom: the typed settings (:class:`AnnotateConfig`, every value
in ``conf/annotate.yaml``), the chunker, the setup checks that stop a run before anything is
written, the run directory (:func:`litseg.utils.task.start_task`), the annotation run, then the
export, view.html and the printed tables.

Settings beyond ``conf/annotate.yaml`` (add them with ``+key=value``):

* ``new_dir``: when the run directory holds units of another setup (method, parameters, prompt,
  model, preprocessing), write to a fresh folder beside it (``DIR-2``, ...) instead of refusing;
* ``output_dir``: where to write when called outside Hydra without ``out_dir``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from litseg.annotation.annotate import RunSetupMismatch, SUMMARY, annotate, run_setup, setup_conflict, write_json
from litseg.annotation.config import AnnotateConfig, ExportSettings, annotate_config_from
from litseg.annotation.length_reference import active_reference, with_length_hint
from litseg.annotation.sources import BookSource, Prepare, dataset_sources, file_sources, is_dataset_spec
from litseg.annotation.store import CHUNKS, LEDGER
from litseg.utils.jsonl import iter_jsonl, read_jsonl
from litseg.annotation.view import chunk_table, render_html, unit_parts
from litseg.annotation.word_cap import WordCap, resolve_word_cap
from litseg.chunkers.base import Chunker
from litseg.chunkers.build import build_chunker_from_config
from litseg.segmentation.config import PreprocessConfig
from litseg.errors import SetupError
from litseg.llm.config import LLMConfig
from litseg.run_result import FAILED_EXIT, INPUTS_SKIPPED_EXIT, OK, RunResult
from litseg.segmentation.types import Document
from litseg.utils.config import section_dict
from litseg.utils.task import hydra_run_dir, start_task
from litseg.annotation.export import DEFAULT_SHARD_ROWS, export_runs
from litseg.segmentation.preprocess import prepare_document
from litseg.segmentation.reading import iter_input_paths

log = logging.getLogger(__name__)

#: Where a run writes outside Hydra when neither out_dir nor +output_dir names a folder.
DEFAULT_DIR = "outputs/annotate"


def exit_code(summary: dict[str, Any], strict: bool) -> tuple[int, str]:
    """A finished run's exit code and why (``(OK, "")`` when ``strict`` is off): FAILED_EXIT when a
    book or unit failed, else INPUTS_SKIPPED_EXIT when inputs were skipped (:mod:`litseg.run_result`)."""
    if not strict:
        return OK, ""
    if summary["units_failed"] or summary["books_failed"]:
        return FAILED_EXIT, f"{summary['units_failed']} unit(s) and {len(summary['books_failed'])} book(s) failed"
    if summary["inputs_skipped"]:
        return INPUTS_SKIPPED_EXIT, f"{summary['inputs_skipped']} input(s) skipped"
    return OK, ""


def annotate_task(cfg: DictConfig, out_dir: Path | None = None) -> RunResult:
    """What annotate.py runs: :func:`run_annotate`, its chunk count as the metric and the exit
    code of ``strict_exit`` (:func:`exit_code`); the entry exits with it (:mod:`litseg.cli`)."""
    settings = annotate_config_from(cfg)
    summary = run_annotate(cfg, out_dir)
    code, reason = exit_code(summary, settings.strict_exit)
    # the folder written: with +new_dir=true it is a fresh one beside the planned folder
    run_dir = Path(summary["run_dir"])
    return RunResult(metric=float(summary["chunks"]), run_dir=run_dir, exit_code=code, reason=reason,
                     summary=summary)


def build_chunker_for_run(cfg: DictConfig | AnnotateConfig) -> tuple[Chunker, dict[str, Any] | None]:
    """The chunker a composed annotate config describes, with its soft length reference."""
    settings = cfg if isinstance(cfg, AnnotateConfig) else annotate_config_from(cfg)
    reference = active_reference(settings.length_reference)
    prompt = settings.prompt
    if prompt is not None:
        prompt = with_length_hint(prompt, reference)
    chunker = build_chunker_from_config(settings.method, llm=settings.llm, prompt=prompt,
                                        feedback=settings.feedback, length_reference=reference)
    if reference is not None and getattr(chunker, "length_reference", None) is None:
        log.warning("method=%s takes no length reference; length_reference is ignored", chunker.name)
    return chunker, reference


def input_sources(settings: AnnotateConfig, prepare: Callable[[Any], Document]) -> Iterator[BookSource]:
    spec, options = settings.input, settings.input_options
    if is_dataset_spec(spec):
        sources: Any = dataset_sources(spec, prepare, id_column=options.id_column,
                                       title_column=options.title_column)
    else:
        sources = file_sources(spec, prepare)
    if not settings.shard:
        yield from sources
        return
    index, count = _parse_shard(settings.shard)
    for source in sources:
        if int(hashlib.sha256(source.label.encode()).hexdigest(), 16) % count == index:
            yield source


def _parse_shard(text: str) -> tuple[int, int]:
    try:
        index, count = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"shard must look like 'i/N' (e.g. 0/4), got {text!r}") from None
    if not 0 <= index < count:
        raise ValueError(f"shard {text!r}: need 0 <= i < N")
    return index, count


def prompt_versions(settings: AnnotateConfig, chunker: Chunker) -> dict[str, Any]:
    versions = getattr(chunker, "prompt_versions", None)
    if callable(versions):
        return versions()
    prompt = getattr(chunker, "prompt", None) or settings.prompt
    if not hasattr(chunker, "llm"):
        return {}
    feedback = settings.feedback
    return {"prompt": getattr(prompt, "name", None), "version": getattr(prompt, "version", None),
            "feedback": feedback.version if feedback else None}


def run_annotate(cfg: DictConfig, out_dir: Path | None = None) -> dict[str, Any]:
    """Annotate as ``cfg`` says into ``out_dir`` (else Hydra's run directory); returns the summary."""
    settings = annotate_config_from(cfg)
    chunker, reference = build_chunker_for_run(settings)
    try:
        # Setup errors stop the run here, once, in one line (litseg.cli), before anything is written.
        cap, prep_settings = _check_setup(settings, chunker)
        planned = Path(out_dir) if out_dir else hydra_run_dir(settings.output_dir or DEFAULT_DIR)
        out = _run_dir_for(planned, run_setup(chunker.fingerprint(), prep_settings), settings)
        task = start_task("annotate", cfg, run_dir=out, fallback=DEFAULT_DIR)
        prepare = document_reader(required_preprocess(settings), cap)
        inputs, spec = _book_inputs(settings, chunker, prepare)
        extra = {"prompt_versions": prompt_versions(settings, chunker), "length_reference": reference,
                 "shard": settings.shard, "input": spec, "word_cap": cap.to_dict()}
        summary = annotate(inputs=inputs, chunker=chunker, out_dir=out, prepare=prepare,
                           limit_units=settings.limit_units, resume=settings.resume,
                           window_units=settings.window_units, prepare_settings=prep_settings,
                           extra_summary=extra, commit=task.commit)
    finally:
        close_chunker(chunker)
    _add_chunker_summary(chunker, out, summary)
    if settings.export.enabled:
        summary["export"] = _export(out, settings.export)
    if settings.view:
        _write_view(out, summary, settings.view_max_chunks)
    _print_end(settings.print_table, out, summary)
    task.finish(summary, summary["chunks"])
    summary["run_dir"] = str(out)  # for the exit line (not in run_summary.json: a folder can be moved)
    return summary


def annotate_books(chunker: Chunker, sources: Callable[[Prepare], Iterable[BookSource]], out_dir: Path, *,
                   preprocess: PreprocessConfig, llm_config: LLMConfig | None, window_units: int,
                   progress: bool, extra_summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """One annotation run of a built chunker over the books ``sources(prepare)`` gives, for callers
    that bring their own books (evaluate.py's benchmark): the checks of :func:`run_annotate`, the
    unit word cap (``auto`` included), a resumed run into ``out_dir`` and the chunker closed after.
    The summary counts the failed units (no chunks; a rerun into ``out_dir`` tries them again)."""
    try:
        cap, prep_settings = check_chunker(chunker, preprocess, llm_config)
        prepare = document_reader(preprocess, cap)
        summary = annotate(inputs=sources(prepare), chunker=chunker, out_dir=out_dir, prepare=prepare,
                           progress=progress, window_units=window_units, prepare_settings=prep_settings,
                           extra_summary={**(extra_summary or {}), "word_cap": cap.to_dict()})
    finally:
        close_chunker(chunker)
    _add_chunker_summary(chunker, out_dir, summary)
    return summary


def _add_chunker_summary(chunker: Chunker, out: Path, summary: dict[str, Any]) -> None:
    """What the chunker counted itself (a teacher's stages, a server's calls) joins the summary."""
    chunker_summary = getattr(chunker, "summary", None)
    if callable(chunker_summary):
        summary.update(chunker_summary())
        _rewrite_summary(out, summary)


def close_chunker(chunker: Chunker) -> None:
    """Release the chunker's model or server connection (chunkers without one have no close)."""
    close = getattr(chunker, "close", None)
    if callable(close):
        close()


def _check_setup(settings: AnnotateConfig, chunker: Chunker) -> tuple[WordCap, dict[str, Any]]:
    """Fail early on a missing input or a model that cannot serve; the unit word cap and the
    preprocessing settings a unit's key hashes."""
    if not callable(getattr(chunker, "book_sources", None)):
        if settings.input is None:
            raise SetupError("input is missing: name the books to segment, e.g. input=path/to/book.txt "
                             "(a file, a directory or a glob)")
        if not is_dataset_spec(settings.input):
            iter_input_paths(settings.input)  # FileNotFoundError naming what was looked for
    return check_chunker(chunker, required_preprocess(settings), settings.llm)


def required_preprocess(settings: AnnotateConfig) -> PreprocessConfig:
    """The run's ``preprocess`` group; annotate.yaml composes one, a hand-made config may not."""
    if settings.preprocess is None:
        raise SetupError("no preprocess config: annotate.yaml composes one (preprocess=default)")
    return settings.preprocess


def check_chunker(chunker: Chunker, preprocess: PreprocessConfig, llm_config: LLMConfig | None
                  ) -> tuple[WordCap, dict[str, Any]]:
    """A model folder or server that is not there stops the run here, before anything is written;
    returns the unit word cap (``preprocess.max_words``: a number, or auto, the model's context
    window; litseg.annotation.word_cap) and the preprocessing settings a unit's key hashes."""
    check = getattr(chunker, "check", None)
    if callable(check):
        check()
    cap = resolve_word_cap(preprocess, chunker, llm_config)
    log.info("unit word cap: %s", cap.describe())
    hashed = {k: v for k, v in section_dict(preprocess).items() if k != "auto"}
    return cap, hashed | {"max_words": cap.max_words}


def document_reader(preprocess: PreprocessConfig, cap: WordCap) -> Prepare:
    """How every book of a run is read and cut into units and sentences (the preprocess group)."""
    return partial(prepare_document, preprocess=preprocess, max_words=cap.max_words)


def _book_inputs(settings: AnnotateConfig, chunker: Chunker, prepare: Callable[[Any], Document]) -> tuple[Any, Any]:
    """The books to annotate and how the summary names them: a chunker that brings its own books
    (imported) reads those, anything else the ``input`` setting."""
    book_sources = getattr(chunker, "book_sources", None)
    if not callable(book_sources):
        return input_sources(settings, prepare), settings.input
    if settings.input:
        log.warning("method=%s reads the books its records name; input=%s is ignored", chunker.name, settings.input)
    return book_sources(prepare), str(getattr(chunker, "path", chunker.name))


def _export(out: Path, export: ExportSettings) -> dict[str, Any]:
    manifest = export_runs([out], export.dir, shard_rows=int(export.shard_rows or DEFAULT_SHARD_ROWS),
                           parquet=export.parquet)
    return {"dir": str(Path(export.dir or out / "dataset")), "tables": manifest["tables"]}


def _write_view(out: Path, summary: dict[str, Any], max_chunks: int) -> None:
    if summary["chunks_total_in_dir"] > max_chunks:
        log.info("view.html skipped: %d chunks > view_max_chunks=%d", summary["chunks_total_in_dir"], max_chunks)
        return
    title = f"{summary['method']} - " + ", ".join(Path(str(p)).name for p in _as_list(summary["input"])[:3])
    (out / "view.html").write_text(render_html(title, read_jsonl(out / CHUNKS), read_jsonl(out / LEDGER)),
                                   encoding="utf-8")


def _run_dir_for(out: Path, setup: dict[str, Any], settings: AnnotateConfig) -> Path:
    """``out``, unless it holds units of another setup: then a fresh folder beside it with
    ``+new_dir=true`` (``out-2``, ``out-3``...), else :class:`RunSetupMismatch` in one line."""
    if not settings.resume:
        return out
    conflict = setup_conflict(out, setup)
    if conflict is None:
        return out
    if not settings.new_dir:
        raise RunSetupMismatch(conflict)
    k = 2
    while setup_conflict(out.with_name(f"{out.name}-{k}"), setup) is not None:
        k += 1
    fresh = out.with_name(f"{out.name}-{k}")
    log.warning("%s holds a run of another setup; writing this one to %s", out, fresh)
    return fresh


def _rewrite_summary(out: Path, summary: dict[str, Any]) -> None:
    write_json(out / SUMMARY, summary)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def first_chunks(out: Path, n: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for row in iter_jsonl(out / CHUNKS):
        if len(rows) >= n:
            break
        rows.append(row)
    return rows


def summary_table(summary: dict[str, Any]) -> Any:
    """A rich Table of the run's accounting: this run beside the whole run directory."""
    from rich.table import Table

    here, total = summary, summary["in_dir"]
    table = Table(title="annotation summary", show_lines=False)
    table.add_column("")
    table.add_column("this run", justify="right")
    table.add_column("run dir", justify="right")

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:,.1f}"
        if isinstance(v, int):
            return f"{v:,}"
        if isinstance(v, dict):
            return ", ".join(f"{k} {fmt(x)}" for k, x in sorted(v.items())) or "-"
        return "-" if v is None else str(v)

    rows = [
        ("books read / done earlier / failed",
         f"{here['books']} / {here['books_skipped']} / {len(here['books_failed'])}", None),
        *([("inputs skipped (listed below)", here["inputs_skipped"], None)] if here["inputs_skipped"] else []),
        ("units done / skipped / failed", f"{here['units']} / {here['units_skipped']} / {here['units_failed']}",
         total.get("units")),
        ("chunks", here["chunks"], total.get("chunks")),
        *(_model_rows(here, total) if here["calls"] or total["calls"] else [("model calls", "none", "none")]),
        ("fallbacks", here["fallbacks"], total.get("fallbacks")),
        ("seconds (wall)", here["seconds"], None),
    ]
    for label, a, b in rows:
        table.add_row(label, fmt(a), fmt(b))
    return table


def _model_rows(here: dict[str, Any], total: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """The summary rows of a run with model calls (a chunker without a model has none to show)."""
    return [
        ("calls (retries)", f"{here['calls']:,} ({here['retries']:,})",
         f"{total['calls']:,} ({total['retries']:,})"),
        ("prompt tokens", here["prompt_tokens"], total.get("prompt_tokens")),
        ("  of which cached", here["cached_tokens"], total.get("cached_tokens")),
        ("completion tokens", here["completion_tokens"], total.get("completion_tokens")),
        *((f"  {name} per 1k words", (here.get("per_1k_words") or {}).get(key),
           (total.get("per_1k_words") or {}).get(key))
          for name, key in (("calls", "calls"), ("prompt", "prompt_tokens"), ("cached", "cached_tokens"),
                            ("completion", "completion_tokens"))),
        ("repairs", here["repairs"], total.get("repairs")),
        ("stages unavailable", here.get("stages_unavailable"), total.get("stages_unavailable")),
    ]


def _print_end(n: int, out: Path, summary: dict[str, Any]) -> None:
    """The first ``n`` chunks (0: none), the accounting table and what failed."""
    from rich.console import Console

    console = Console()
    if n:
        chunks = first_chunks(out, n + 1)
        console.print(chunk_table(chunks[:n], parts=unit_parts(iter_jsonl(out / LEDGER))))
        if len(chunks) > n:
            console.print(f"... {summary['chunks_total_in_dir'] - n} more chunks in {out / CHUNKS}")
    console.print(summary_table(summary))
    keys = ("books", "units", "units_skipped", "units_failed", "chunks", "calls", "prompt_tokens",
            "completion_tokens", "retries", "repairs", "fallbacks", "seconds")
    console.print("summary: " + json.dumps({k: summary[k] for k in keys}, default=str))
    for row in summary["inputs"]:
        if row["outcome"] != "chunked":
            console.print(f"{row['outcome']}: {row['path']} ({row['why']})", markup=False, highlight=False,
                          soft_wrap=True)
    if summary["units_failed"]:
        console.print(f"[red]{summary['units_failed']} unit(s) failed[/red]; errors in {out / 'failures.jsonl'} "
                      "(a rerun into this directory tries them again)")
        listed = summary.get("failed_units") or []
        for fail in listed[:20]:
            console.print(f"  failed: {fail['book_id']}/{fail['unit_id']}: {fail['error']}", markup=False,
                          highlight=False, soft_wrap=True)
        if summary["units_failed"] > min(len(listed), 20):
            console.print(f"  ... and {summary['units_failed'] - min(len(listed), 20)} more", markup=False)
    if "export" in summary:
        console.print(f"dataset: {summary['export']['dir']}")
    console.print(f"outputs: {out}")
