"""What ``annotate.py`` runs once Hydra has composed the config (kept out of the entry script so
that tests and notebooks can call it with a composed config)."""

from __future__ import annotations

import json
import logging
from functools import partial
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from litseg.chunkers.base import build_chunker_from_config
from litseg.pipeline.annotate import annotate
from litseg.pipeline.store import read_jsonl
from litseg.pipeline.view import chunk_table, render_html

log = logging.getLogger(__name__)


def output_dir(cfg: DictConfig) -> Path:
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir)
    except (ImportError, ValueError):
        return Path(cfg.get("output_dir") or "outputs/annotate")


def run_annotate(cfg: DictConfig, out_dir: Path | None = None) -> dict[str, Any]:
    from litseg.segmentation.preprocess import iter_input_paths, prepare_document

    out = Path(out_dir) if out_dir else output_dir(cfg)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    inputs = iter_input_paths(str(cfg.input))
    chunker = build_chunker_from_config(cfg.method, cfg.get("llm"), cfg.get("prompt"))
    prep = cfg.preprocess
    prepare = partial(prepare_document, max_words=int(prep.max_words),
                      max_sentence_words=int(prep.max_sentence_words))
    try:
        summary = annotate(inputs=inputs, chunker=chunker, out_dir=out, prepare=prepare,
                           limit_units=cfg.get("limit_units"), resume=bool(cfg.resume))
    finally:
        close = getattr(chunker, "close", None)
        if callable(close):
            close()
    chunks = read_jsonl(out / "chunks.jsonl")
    if cfg.get("view", True):
        title = f"{summary['method']} - " + ", ".join(Path(p).name for p in summary["inputs"][:3])
        (out / "view.html").write_text(render_html(title, chunks, read_jsonl(out / "diagnostics.jsonl")),
                                       encoding="utf-8")
    _print_end(cfg, out, summary, chunks)
    return summary


def _print_end(cfg: DictConfig, out: Path, summary: dict[str, Any], chunks: list[dict[str, Any]]) -> None:
    from rich.console import Console

    console = Console()
    n = int(cfg.get("print_table", 40) or 0)
    if n:
        console.print(chunk_table(chunks[:n]))
        if len(chunks) > n:
            console.print(f"... {len(chunks) - n} more chunks in {out / 'chunks.jsonl'}")
    keys = ("books", "units", "units_skipped", "units_failed", "chunks", "calls", "prompt_tokens",
            "completion_tokens", "retries", "repairs", "fallbacks", "seconds")
    console.print("summary: " + json.dumps({k: summary[k] for k in keys}, default=str))
    for fail in summary["books_failed"]:
        console.print(f"[red]unreadable:[/red] {fail['path']}: {fail['error']}")
    console.print(f"outputs: {out}")
