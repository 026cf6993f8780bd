"""Export annotation runs as a sharded dataset that ``datasets`` loads directly.

::

    python -m litseg.annotation.export RUN_DIR [RUN_DIR ...] [--out DIR] [--shard-rows N] [--parquet]

writes (default ``RUN_DIR/dataset``)::

    manifest.json                 config, prompt versions, model, git commit, counts, files
    README.md                     dataset card whose YAML header declares the tables and their features
    chunks/train-00000-of-0000N.jsonl     one chunk record per row (the chunk contract of types.py)
    units/...                     one row per unit: segments, fallback, accounting, stage answers
    sentences/...                 the indexed sentences of every unit
    documents/...                 one row per book

and, with ``--parquet``, a ``.parquet`` beside every ``.jsonl`` shard. Only committed units are
exported, in a fixed order (book, then unit), so an interrupted-and-resumed run exports exactly
what an uninterrupted one does. Several run directories (a corpus split over machines) merge
into one export; a unit present in two of them is taken once.

Loading::

    load_dataset("RUN/dataset", "chunks", split="train")           # types from README.md
    load_dataset("parquet", data_files="RUN/dataset/chunks/*.parquet", split="train")
    load_dataset("json", data_files="RUN/dataset/chunks/*.jsonl", split="train",
                 features=export_features("chunks"))              # JSONL with explicit types

Plain ``load_dataset("json", data_files=...)`` without ``features`` works as long as the first
shard has a non-empty value in every list column; the explicit types make it independent of that.

The card's config of every table carries a digest of the table's rows in its ``description``:
``datasets`` keys the cache of a folder by its card and relative file patterns, not by the files'
contents, so without it every export would share one cache entry and return the first one's rows.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from litseg.annotation.store import CHUNKS, DOCUMENTS, LEDGER, SENTENCES, read_range, safe_line
from litseg.utils.jsonl import iter_jsonl
from litseg.annotation.totals import UnitCounts
from litseg.segmentation.textsafe import clean_value
from litseg.segmentation.types import Chunk

log = logging.getLogger(__name__)

EXPORT_DIR = "dataset"
MANIFEST = "manifest.json"
FORMAT_VERSION = 1
DEFAULT_SHARD_ROWS = 50_000
TABLES = ("chunks", "units", "sentences", "documents")

# Column types: "str", "int", "float", "bool", "list[int]", "list[str]", "list[list[int]]",
# "json" (any value, stored as a JSON string so every shard has the same type) and
# "segments" (list of {subtitle, from_idx, to_idx, context_idx}).
_ANNOTATION_TYPES = {
    "str": "str", "int": "int", "float": "float", "bool": "bool", "list[int]": "list[int]",
    "list[str]": "list[str]", "list[tuple[int, int]]": "list[list[int]]",
    "int | None": "int", "str | None": "str",
}


def _chunk_columns() -> dict[str, str]:
    # a field of any other annotation is stored as a JSON string
    cols = {f.name: _ANNOTATION_TYPES[str(f.type)] if str(f.type) in _ANNOTATION_TYPES else "json"
            for f in dataclasses.fields(Chunk)}
    cols.update(start="int", end="int", unit_key="str")
    return cols


UNIT_COLUMNS: dict[str, str] = {
    "book_id": "str", "unit_id": "str", "unit_index": "int", "unit_title": "str", "unit_key": "str",
    "method": "str", "n_sentences": "int", "n_words": "int", "n_chunks": "int", "fallback": "str",
    "tries": "int", "calls": "int", "retries": "int", "prompt_tokens": "int", "cached_tokens": "int",
    "completion_tokens": "int", "seconds": "float", "first_try_valid": "bool",
    "stages_unavailable": "list[str]", "segments": "segments", "answer": "json", "stages": "json",
    "repairs": "json", "matter": "str",
}
SENTENCE_COLUMNS: dict[str, str] = {
    "book_id": "str", "unit_id": "str", "idx": "int", "start": "int", "end": "int", "text": "str",
    "unit_key": "str",
}
DOCUMENT_COLUMNS: dict[str, str] = {
    "book_id": "str", "title": "str", "author": "str", "source_path": "str", "encoding": "str",
    "sha256": "str", "n_chars": "int", "n_units": "int", "text_file": "str", "warnings": "list[str]",
}


def table_columns(table: str) -> dict[str, str]:
    return {"chunks": _chunk_columns(), "units": UNIT_COLUMNS, "sentences": SENTENCE_COLUMNS,
            "documents": DOCUMENT_COLUMNS}[table]


def arrow_schema(table: str) -> Any:
    import pyarrow as pa

    ints = pa.list_(pa.int64())
    kinds = {
        "str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "json": pa.string(),
        "list[int]": ints, "list[str]": pa.list_(pa.string()), "list[list[int]]": pa.list_(ints),
        "segments": pa.list_(pa.struct([("subtitle", pa.string()), ("from_idx", pa.int64()),
                                        ("to_idx", pa.int64()), ("context_idx", ints)])),
    }
    return pa.schema([(name, kinds[kind]) for name, kind in table_columns(table).items()])


def export_features(table: str) -> Any:
    """The ``datasets.Features`` of an exported table (for ``load_dataset("json", ..., features=)``)."""
    import datasets

    return datasets.Features.from_arrow_schema(arrow_schema(table))


def _conform(row: dict[str, Any], columns: dict[str, str]) -> dict[str, Any]:
    """The row with exactly the table's columns, each in its declared type."""
    out: dict[str, Any] = {}
    for name, kind in columns.items():
        value = row.get(name)
        if kind == "json":
            value = json.dumps(value, ensure_ascii=False, default=str) if value is not None else None
        elif kind == "segments":
            value = [_segment_row(s) for s in (value or [])]
        elif kind.startswith("list"):
            value = [list(v) if isinstance(v, (list, tuple)) else v for v in (value or [])]
        elif kind == "str" and value is not None and not isinstance(value, str):
            value = str(value)
        out[name] = value
    return out


def _segment_row(segment: Mapping[str, Any]) -> dict[str, Any]:
    """A ledger segment (Segment.model_dump: subtitle, from_idx, to_idx, context_idx) in the
    export's types."""
    return {"subtitle": str(segment["subtitle"]), "from_idx": int(segment["from_idx"]),
            "to_idx": int(segment["to_idx"]), "context_idx": [int(c) for c in segment["context_idx"]]}


# ---------------------------------------------------------------------------------------------
# reading committed units from run directories

def _committed_units(run_dirs: Sequence[Path]) -> list[tuple[Path, dict[str, Any]]]:
    """Ledger rows of every committed unit, first occurrence of a key wins, sorted by book and unit."""
    seen: set[str] = set()
    rows: list[tuple[Path, dict[str, Any]]] = []
    for run in run_dirs:
        for row in iter_jsonl(run / LEDGER):
            key = row.get("key")
            if key is None or key in seen:
                continue
            seen.add(key)
            rows.append((run, row))
    # annotate writes book_id, unit_id and unit_index on every ledger row (_unit_diagnostics)
    rows.sort(key=lambda r: (str(r[1]["book_id"]), int(r[1]["unit_index"] or 0), str(r[1]["unit_id"])))
    return rows


class _UnitRows:
    """A unit's rows in a data file: by byte range when the ledger has offsets, else from an index."""

    def __init__(self, run_dirs: Sequence[Path], name: str) -> None:
        self.name = name
        self._index: dict[Path, dict[str, list[dict[str, Any]]]] = {}
        self._run_dirs = run_dirs

    def rows(self, run: Path, ledger_row: dict[str, Any]) -> list[dict[str, Any]]:
        offsets = (ledger_row.get("offsets") or {}).get(self.name)
        if offsets is not None:
            return read_range(run / self.name, int(offsets[0]), int(offsets[1]))
        if run not in self._index:  # a ledger from before offsets: index the whole file once
            index: dict[str, list[dict[str, Any]]] = {}
            for r in iter_jsonl(run / self.name):
                index.setdefault(str(r.get("unit_key")), []).append(r)
            self._index[run] = index
        return self._index[run].get(str(ledger_row["key"]), [])


def _units_row(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "unit_key": row.get("key")}


# ---------------------------------------------------------------------------------------------
# writing shards

class _ShardWriter:
    def __init__(self, root: Path, table: str, shard_rows: int, parquet: bool) -> None:
        self.dir = root / table
        self.dir.mkdir(parents=True, exist_ok=True)
        self.table = table
        self.columns = table_columns(table)
        self.shard_rows = shard_rows
        self.parquet = parquet
        self.rows = 0
        self.repaired_rows = 0  # rows with a value UTF-8/JSON cannot hold, replaced to write them
        self._buffer: list[dict[str, Any]] = []  # rows of the current shard, kept for Parquet only
        self._lines: list[bytes] = []  # its JSONL lines
        self._parts: list[Path] = []
        self._digest = hashlib.sha256()  # of every JSONL line in order: the table's content

    def add(self, rows: Iterable[dict[str, Any]]) -> None:
        for r in rows:
            row = _conform(r, self.columns)
            line, changed = safe_line(row)
            if changed:  # e.g. a lone surrogate in a run written by an older version
                row = clean_value(row)[0]
                self.repaired_rows += 1
            if self.parquet:
                self._buffer.append(row)
            self._lines.append(line)
            self._digest.update(line)
            self.rows += 1
            if len(self._lines) >= self.shard_rows:
                self._flush()

    def _flush(self) -> None:
        if not self._lines and self._parts:
            return
        part = self.dir / f"part-{len(self._parts):05d}"
        with part.with_suffix(".jsonl").open("wb") as f:
            f.write(b"".join(self._lines))
        if self.parquet:
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.Table.from_pylist(self._buffer, schema=arrow_schema(self.table)),
                           part.with_suffix(".parquet"))
        self._parts.append(part)
        self._buffer = []
        self._lines = []

    def digest(self) -> str:
        """A short digest of the table's rows (the Parquet shards hold the same rows)."""
        return self._digest.hexdigest()[:16]

    def close(self) -> list[str]:
        """Write the last shard and give every shard its final name (``train-00000-of-00004.jsonl`` style)."""
        if self._lines or not self._parts:
            self._flush()
        total = len(self._parts)
        names: list[str] = []
        for i, part in enumerate(self._parts):
            for suffix in (".jsonl", ".parquet") if self.parquet else (".jsonl",):
                final = self.dir / f"train-{i:05d}-of-{total:05d}{suffix}"
                os.replace(part.with_suffix(suffix), final)
                names.append(str(final.relative_to(self.dir.parent)))
        return names


def export_runs(
    run_dirs: Sequence[str | Path],
    out: str | Path | None = None,
    *,
    shard_rows: int = DEFAULT_SHARD_ROWS,
    parquet: bool = False,
    tables: Sequence[str] = TABLES,
) -> dict[str, Any]:
    """Export the committed units of ``run_dirs`` into ``out``; returns the manifest."""
    runs = [Path(r) for r in run_dirs]
    if not runs:
        raise ValueError("export: name at least one run directory")
    for run in runs:
        if not (run / LEDGER).exists():
            raise FileNotFoundError(f"{run} is not an annotation run directory (no {LEDGER})")
    unknown = sorted(set(tables) - set(TABLES))
    if unknown:
        raise ValueError(f"export: unknown table(s) {unknown}; known: {list(TABLES)}")
    if shard_rows < 1:
        raise ValueError(f"export: shard_rows must be >= 1, got {shard_rows}")
    if parquet:
        try:
            import pyarrow  # noqa: F401
        except ImportError as exc:
            raise ImportError("export --parquet needs pyarrow (pip install pyarrow)") from exc
    target = Path(out) if out is not None else runs[0] / EXPORT_DIR
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(staging, 0o777 & ~umask)  # mkdtemp's 0700 would hide the export from other users
    try:
        manifest = _write_export(runs, staging, shard_rows=shard_rows, parquet=parquet, tables=tables)
        _swap_in(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest


def _write_export(runs: list[Path], root: Path, *, shard_rows: int, parquet: bool,
                  tables: Sequence[str]) -> dict[str, Any]:
    committed = _committed_units(runs)
    writers = {t: _ShardWriter(root, t, shard_rows, parquet) for t in tables}
    chunk_rows, sentence_rows = _UnitRows(runs, CHUNKS), _UnitRows(runs, SENTENCES)
    books: dict[str, None] = {}
    fallbacks: Counter[str] = Counter()
    for run, row in committed:
        books.setdefault(str(row.get("book_id")), None)
        fallbacks[UnitCounts.from_row(row).fallback] += 1
        if "chunks" in writers:
            writers["chunks"].add(chunk_rows.rows(run, row))
        if "sentences" in writers:
            writers["sentences"].add(sentence_rows.rows(run, row))
        if "units" in writers:
            writers["units"].add([_units_row(row)])
    if "documents" in writers:
        docs: dict[str, dict[str, Any]] = {}
        for run in runs:
            for d in iter_jsonl(run / DOCUMENTS):
                if d.get("book_id") in books:
                    docs.setdefault(str(d["book_id"]), d)
        writers["documents"].add(docs[b] for b in sorted(docs))
    files = {t: {"files": w.close(), "rows": w.rows, "format": "jsonl+parquet" if parquet else "jsonl",
                 "sha256": w.digest(),
                 **({"repaired_rows": w.repaired_rows} if w.repaired_rows else {})}
             for t, w in writers.items()}
    manifest = _manifest(runs, files, committed, len(books), dict(fallbacks))
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2, default=str) + "\n", encoding="utf-8")
    (root / "README.md").write_text(_dataset_card(manifest, tables, parquet), encoding="utf-8")
    return manifest


def _manifest(runs: list[Path], files: dict[str, Any], committed: list[tuple[Path, dict[str, Any]]],
              n_books: int, fallbacks: dict[str, int]) -> dict[str, Any]:
    summaries = [_read_json(r / "run_summary.json") for r in runs]
    first = summaries[0]
    fingerprints = {json.dumps(s.get("fingerprint"), sort_keys=True, default=str) for s in summaries if s}
    totals: Counter[str] = Counter()
    for _, row in committed:
        for k in ("calls", "prompt_tokens", "cached_tokens", "completion_tokens", "retries", "n_words"):
            totals[k] += row.get(k) or 0
    words = totals["n_words"]
    return {
        "format": "litseg-annotations",
        "format_version": FORMAT_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "runs": [str(r) for r in runs],
        "method": first.get("method"),
        "fingerprint": first.get("fingerprint"),
        "consistent_fingerprints": len(fingerprints) <= 1,
        "prompt_versions": first.get("prompt_versions"),
        "model": (first.get("fingerprint") or {}).get("model"),
        "git_commit": first.get("git_commit"),
        "config": _read_config(runs[0]),
        "counts": {
            "books": n_books, "units": len(committed), "chunks": files.get("chunks", {}).get("rows"),
            "sentences": files.get("sentences", {}).get("rows"), "fallbacks": fallbacks,
            "units_failed_last_run": sum(int(s["units_failed"]) for s in summaries if s),  # run_summary.json
            "books_failed_last_run": sum(len(s.get("books_failed", [])) for s in summaries if s),
        },
        "accounting": {**{k: int(v) for k, v in totals.items()},
                       "per_1k_words": {k: round(v * 1000 / words, 1) for k, v in totals.items()
                                        if k != "n_words"} if words else {}},
        "tables": files,
    }


def _dataset_card(manifest: dict[str, Any], tables: Sequence[str], parquet: bool) -> str:
    import yaml

    suffix = "parquet" if parquet else "jsonl"
    # datasets keys its cache of a folder's config by the card (names, relative file patterns,
    # features), not by the files' contents: without the digest every export of this layout would
    # share one cache entry and load_dataset would return the rows of whichever export it saw first.
    meta: dict[str, Any] = {"configs": [
        {"config_name": t, "description": _config_description(t, manifest["tables"][t]),
         "data_files": [{"split": "train", "path": f"{t}/*.{suffix}"}],
         **({"default": True} if t == "chunks" else {})} for t in tables]}
    try:
        import datasets

        meta["dataset_info"] = [datasets.DatasetInfo(features=export_features(t), config_name=t)._to_yaml_dict()
                                for t in tables]
    except ImportError:  # without datasets the card still names the files; types are inferred
        pass
    except Exception as exc:  # noqa: BLE001 - the card's YAML helper is not public API in every version
        log.warning("dataset card without feature types (%s: %s)", type(exc).__name__, exc)
    counts = manifest["counts"]
    body = (f"# LitSeg annotations ({manifest.get('method')})\n\n"
            f"{counts['books']} books, {counts['units']} units, {counts['chunks']} chunks; written by "
            f"`litseg.annotation.export` from {', '.join(manifest['runs'])}. See manifest.json for the "
            "configuration, prompt versions, model and accounting.\n\n"
            "```python\nfrom datasets import load_dataset\n"
            "chunks = load_dataset(\"path/to/this/folder\", \"chunks\", split=\"train\")\n```\n")
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n" + body


def _config_description(table: str, files: Mapping[str, Any]) -> str:
    """The description of a table's config: its rows and the digest of their content, which makes
    the config (and so the datasets cache entry) differ whenever the rows differ."""
    return f"litseg {table}: {files['rows']} rows, content sha256 {files['sha256']}"


def _swap_in(staging: Path, target: Path) -> None:
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
    os.replace(staging, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _read_config(run: Path) -> Any:
    path = run / "config.yaml"
    if not path.exists():
        return None
    import yaml

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        return None


def iter_export_rows(export_dir: str | Path, table: str = "chunks") -> Iterator[dict[str, Any]]:
    """Rows of an exported table, shard by shard, without ``datasets``."""
    for path in sorted((Path(export_dir) / table).glob("*.jsonl")):
        yield from iter_jsonl(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Export annotation run(s) as a sharded dataset.")
    parser.add_argument("runs", nargs="+", help="run directories (written by annotate.py)")
    parser.add_argument("--out", default=None, help=f"output folder (default: FIRST_RUN/{EXPORT_DIR})")
    parser.add_argument("--shard-rows", type=int, default=DEFAULT_SHARD_ROWS)
    parser.add_argument("--parquet", action="store_true", help="also write Parquet shards")
    parser.add_argument("--tables", nargs="+", default=list(TABLES), choices=list(TABLES))
    args = parser.parse_args(argv)
    try:
        manifest = export_runs(args.runs, args.out, shard_rows=args.shard_rows, parquet=args.parquet,
                               tables=args.tables)
    except (FileNotFoundError, ValueError, ImportError) as exc:
        print(f"export: {exc}", file=sys.stderr)
        return 2
    counts = manifest["counts"]
    print(f"exported {counts['books']} books, {counts['units']} units, {counts['chunks']} chunks "
          f"to {Path(args.out) if args.out else Path(args.runs[0]) / EXPORT_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
