"""What ``annotate.py`` runs once Hydra has composed the config (kept out of the entry script so
that tests and notebooks can call it with a composed config).

Optional keys beyond ``conf/annotate.yaml`` (add them with ``+key=value``):

* ``length_reference``: a config of the ``length_reference`` group (``length_reference=NAME``);
* ``input_options``: ``{id_column, title_column}`` for ``input=hf:...`` / ``input=dataset:...``;
* ``shard``: ``"i/N"`` annotates only the books whose label hashes to shard ``i`` of ``N`` (one
  process per shard, each into its own run directory; export merges them);
* ``window_units``: units handed to a batching chunker at once, across books (default 256);
* ``export``: ``{enabled: true, parquet: false, shard_rows: 50000, dir: null}``;
* ``view_max_chunks``: largest run for which view.html is written (default 5000 chunks);
* ``new_dir``: when the run directory holds units of another setup (method, parameters, prompt,
  model, preprocessing), write to a fresh folder beside it (``DIR-2``, ...) instead of refusing.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from litseg.chunkers.base import Chunker, build_chunker_from_config
from litseg.errors import SetupError
from litseg.annotation.annotate import RunSetupMismatch, annotate, run_setup, setup_conflict
from litseg.annotation.length_reference import active_reference, with_length_hint
from litseg.annotation.sources import BookSource, dataset_sources, file_sources, is_dataset_spec
from litseg.annotation.store import CHUNKS, LEDGER, iter_jsonl, read_jsonl
from litseg.annotation.view import chunk_table, render_html
from litseg.annotation.word_cap import resolve_word_cap
from litseg.segmentation.types import Document

log = logging.getLogger(__name__)


def output_dir(cfg: DictConfig) -> Path:
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir)
    except (ImportError, ValueError):
        return Path(cfg.get("output_dir") or "outputs/annotate")


def _plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


def build_chunker_for_run(cfg: DictConfig) -> tuple[Chunker, dict[str, Any] | None]:
    """The chunker a composed annotate config describes, with its soft length reference."""
    reference = active_reference(cfg.get("length_reference"))
    prompt = _plain(cfg.get("prompt"))
    if prompt is not None:
        prompt = with_length_hint(prompt, reference)
    chunker = build_chunker_from_config(cfg.method, llm=cfg.get("llm"), prompt=prompt,
                                        feedback=cfg.get("feedback"), length_reference=reference)
    if reference is not None and getattr(chunker, "length_reference", None) is None:
        log.warning("method=%s takes no length reference; length_reference is ignored", chunker.name)
    return chunker, reference


def input_sources(cfg: DictConfig, prepare: Callable[[Any], Document]) -> Iterator[BookSource]:
    spec = _plain(cfg.input)
    options = _plain(cfg.get("input_options")) or {}
    if is_dataset_spec(spec):
        sources: Any = dataset_sources(spec, prepare, id_column=options.get("id_column"),
                                       title_column=options.get("title_column", "title"))
    else:
        sources = file_sources(spec, prepare)
    shard = cfg.get("shard")
    if not shard:
        yield from sources
        return
    index, count = _parse_shard(str(shard))
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


def prompt_versions(cfg: DictConfig, chunker: Chunker) -> dict[str, Any]:
    versions = getattr(chunker, "prompt_versions", None)
    if callable(versions):
        return versions()
    prompt = getattr(chunker, "prompt", None) or _plain(cfg.get("prompt")) or {}
    feedback = _plain(cfg.get("feedback")) or {}
    if not hasattr(chunker, "llm"):
        return {}
    return {"prompt": prompt.get("name"), "version": prompt.get("version"), "feedback": feedback.get("version")}


def run_annotate(cfg: DictConfig, out_dir: Path | None = None) -> dict[str, Any]:
    from litseg.segmentation.preprocess import prepare_document

    out = Path(out_dir) if out_dir else output_dir(cfg)
    chunker, reference = build_chunker_for_run(cfg)
    prep = cfg.preprocess
    try:
        # Setup errors stop the run here, once, in one line (litseg.cli), before anything is written.
        if not callable(getattr(chunker, "book_sources", None)):
            if OmegaConf.is_missing(cfg, "input"):
                raise SetupError("input is missing: name the books to segment, e.g. input=path/to/book.txt "
                                 "(a file, a directory or a glob)")
            if not is_dataset_spec(_plain(cfg.input)):
                from litseg.segmentation.reading import iter_input_paths

                iter_input_paths(_plain(cfg.input))  # FileNotFoundError naming what was looked for
        check = getattr(chunker, "check", None)
        if callable(check):
            check()
        # preprocess.max_words: a number, or auto (the model's context window; litseg.annotation.word_cap)
        cap = resolve_word_cap(_plain(prep), chunker, _plain(cfg.get("llm")))
        log.info("unit word cap: %s", cap.describe())
        prep_settings = {k: v for k, v in _plain(prep).items() if k != "auto"} | {"max_words": cap.max_words}
        out = _run_dir_for(out, run_setup(chunker.fingerprint(), prep_settings), cfg)
    except BaseException:
        close = getattr(chunker, "close", None)
        if callable(close):
            close()
        raise
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    prepare = partial(prepare_document, max_words=cap.max_words,
                      max_sentence_words=int(prep.max_sentence_words),
                      keep_front_matter=bool(prep.get("keep_front_matter", False)))
    book_sources = getattr(chunker, "book_sources", None)  # a chunker that brings its own books (imported)
    if callable(book_sources):
        inputs: Any = book_sources(prepare)
        given = None if OmegaConf.is_missing(cfg, "input") else _plain(cfg.input)
        if given:
            log.warning("method=%s reads the books its records name; input=%s is ignored", chunker.name, given)
        spec: Any = str(getattr(chunker, "path", chunker.name))
    else:
        inputs, spec = input_sources(cfg, prepare), _plain(cfg.input)
    extra = {"prompt_versions": prompt_versions(cfg, chunker), "length_reference": reference,
             "shard": cfg.get("shard"), "input": spec, "word_cap": cap.to_dict()}
    try:
        summary = annotate(inputs=inputs, chunker=chunker, out_dir=out, prepare=prepare,
                           limit_units=cfg.get("limit_units"), resume=bool(cfg.resume),
                           window_units=int(cfg.get("window_units") or 256), prepare_settings=prep_settings,
                           extra_summary=extra)
    finally:
        close = getattr(chunker, "close", None)
        if callable(close):
            close()
    chunker_summary = getattr(chunker, "summary", None)
    if callable(chunker_summary):
        summary.update(chunker_summary())
        _rewrite_summary(out, summary)
    export = _plain(cfg.get("export")) or {}
    if export.get("enabled", True):
        from litseg.annotation.export import DEFAULT_SHARD_ROWS, export_runs

        manifest = export_runs([out], export.get("dir"), shard_rows=int(export.get("shard_rows") or DEFAULT_SHARD_ROWS),
                               parquet=bool(export.get("parquet", False)))
        summary["export"] = {"dir": str(Path(export.get("dir") or out / "dataset")), "tables": manifest["tables"]}
    if cfg.get("view", True):
        cap = int(cfg.get("view_max_chunks") or 5000)
        if summary["chunks_total_in_dir"] <= cap:
            title = f"{summary['method']} - " + ", ".join(Path(str(p)).name for p in _as_list(summary.get("input"))[:3])
            (out / "view.html").write_text(render_html(title, read_jsonl(out / CHUNKS), read_jsonl(out / LEDGER)),
                                           encoding="utf-8")
        else:
            log.info("view.html skipped: %d chunks > view_max_chunks=%d", summary["chunks_total_in_dir"], cap)
    _print_end(cfg, out, summary)
    return summary


def _run_dir_for(out: Path, setup: dict[str, Any], cfg: DictConfig) -> Path:
    """``out``, unless it holds units of another setup: then a fresh folder beside it with
    ``+new_dir=true`` (``out-2``, ``out-3``...), else :class:`RunSetupMismatch` in one line."""
    if not bool(cfg.get("resume", True)):
        return out
    conflict = setup_conflict(out, setup)
    if conflict is None:
        return out
    if not cfg.get("new_dir"):
        raise RunSetupMismatch(conflict)
    k = 2
    while setup_conflict(out.with_name(f"{out.name}-{k}"), setup) is not None:
        k += 1
    fresh = out.with_name(f"{out.name}-{k}")
    log.warning("%s holds a run of another setup; writing this one to %s", out, fresh)
    return fresh


def _rewrite_summary(out: Path, summary: dict[str, Any]) -> None:
    from litseg.annotation.annotate import SUMMARY, _write_json

    _write_json(out / SUMMARY, summary)


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

    here, total = summary, summary.get("in_dir", {})
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
        ("books read / skipped / failed",
         f"{here['books']} / {here['books_skipped']} / {len(here['books_failed'])}", None),
        ("units done / skipped / failed", f"{here['units']} / {here['units_skipped']} / {here['units_failed']}",
         total.get("units")),
        ("chunks", here["chunks"], total.get("chunks")),
        ("calls (retries)", f"{here['calls']:,} ({here['retries']:,})",
         f"{total.get('calls', 0):,} ({total.get('retries', 0):,})" if total else None),
        ("prompt tokens", here["prompt_tokens"], total.get("prompt_tokens")),
        ("  of which cached", here["cached_tokens"], total.get("cached_tokens")),
        ("completion tokens", here["completion_tokens"], total.get("completion_tokens")),
        *((f"  {name} per 1k words", (here.get("per_1k_words") or {}).get(key),
           (total.get("per_1k_words") or {}).get(key))
          for name, key in (("calls", "calls"), ("prompt", "prompt_tokens"), ("cached", "cached_tokens"),
                            ("completion", "completion_tokens"))),
        ("repairs", here["repairs"], total.get("repairs")),
        ("fallbacks", here["fallbacks"], total.get("fallbacks")),
        ("stages unavailable", here.get("stages_unavailable"), total.get("stages_unavailable")),
        ("seconds (wall)", here["seconds"], None),
    ]
    for label, a, b in rows:
        table.add_row(label, fmt(a), fmt(b))
    return table


def _print_end(cfg: DictConfig, out: Path, summary: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console()
    n = int(cfg.get("print_table", 40) or 0)
    if n:
        chunks = first_chunks(out, n + 1)
        console.print(chunk_table(chunks[:n]))
        if len(chunks) > n:
            console.print(f"... {summary['chunks_total_in_dir'] - n} more chunks in {out / CHUNKS}")
    console.print(summary_table(summary))
    keys = ("books", "units", "units_skipped", "units_failed", "chunks", "calls", "prompt_tokens",
            "completion_tokens", "retries", "repairs", "fallbacks", "seconds")
    console.print("summary: " + json.dumps({k: summary[k] for k in keys}, default=str))
    for fail in summary["books_failed"]:
        console.print(f"[red]unreadable:[/red] {fail['path']}: {fail['error']}")
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
