"""Chunk sets of one evaluation run that come from other chunk sets of the same run.

A ``+merge`` row (dynamic merge of a baseline, :mod:`litseg.chunkers.merge`) only post-processes
its base chunker's chunks. Chunking twice would double the cost of an LLM baseline (perplexity
and margin sampling read logits, which no response cache keeps), so within a run:

* an entry of the ``chunkers`` mapping may name another entry instead of repeating its
  parameters: ``{from: lumberchunker, label: lumberchunker+merge, merge: {target: 175, measure: words}}`` takes
  the method config of the ``lumberchunker`` entry (overrides of that entry carry over) and adds
  the merge (:func:`expand_derived`);
* :class:`ChunkSetBuilder` chunks every distinct base configuration once; a method config that
  differs from an earlier one only by ``merge`` is answered by merging the earlier chunks unit by
  unit (:func:`merge_chunkset`), which gives exactly what chunking with the merge would give.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from litseg.chunkers.base import UnitResult
from litseg.chunkers.merge import merge_options, merge_unit_result

if TYPE_CHECKING:
    from litseg.rag.benchmarks.records import Benchmark
    from litseg.rag.chunk_sets import ChunkerSpec, ChunkSet
    from litseg.segmentation.types import Document

FROM_KEY = "from"


def expand_derived(node: Mapping[str, Any]) -> dict[str, Any]:
    """The ``chunkers`` mapping with every ``{from: KEY, ...}`` entry replaced by a copy of entry
    ``KEY``'s config updated with the entry's other keys (``label``, ``merge``, parameters), and
    placed right after entry ``KEY`` (so a table lists each ``+merge`` row under its base). A
    missing or derived ``KEY`` is an error."""
    derived: dict[str, dict[str, Any]] = {}
    for key, value in node.items():
        if not isinstance(value, Mapping) or FROM_KEY not in value:
            continue
        base_key = str(value[FROM_KEY])
        base = node.get(base_key)
        if not isinstance(base, Mapping):
            raise ValueError(f"chunker {key!r}: from={base_key!r} names no chunker of this run "
                             f"(have {', '.join(k for k in node if k != key)})")
        if FROM_KEY in base:
            raise ValueError(f"chunker {key!r}: from={base_key!r} is itself derived; name the base chunker")
        merged = copy.deepcopy(dict(base))
        merged.pop("label", None)
        merged.update({k: copy.deepcopy(v) for k, v in value.items() if k != FROM_KEY})
        derived[key] = merged
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in derived:
            continue
        out[key] = value
        for d_key, d_value in node.items():
            if d_key in derived and isinstance(d_value, Mapping) and str(d_value[FROM_KEY]) == key:
                out[d_key] = derived[d_key]
    return out


def split_merge(method: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``(base method config, merge options or None)``: the config without ``merge`` and
    ``label``, and the merge when it is on (a target is set)."""
    base = {k: v for k, v in method.items() if k not in ("merge", "label")}
    merge = method.get("merge")
    if not isinstance(merge, Mapping) or merge.get("target") is None:
        return base, None
    return base, dict(merge)


def _key(method: Mapping[str, Any]) -> str:
    return json.dumps(method, sort_keys=True, default=str)


def merge_chunkset(label: str, base: "ChunkSet", docs: Mapping[str, "Document"],
                   merge: Mapping[str, Any]) -> "ChunkSet":
    """``base``'s chunks merged per unit towards ``merge['target']`` (rule of
    :mod:`litseg.chunkers.merge`); the chunk set keeps the base's other fields (failures,
    warnings and whatever else it records) and its chunking time plus the merge's."""
    opts = dict(merge)
    typed = merge_options(opts, f"chunkers.{label}.merge")  # both keys written (MergeOptions has no defaults)
    t0 = time.perf_counter()
    by_unit: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for c in base.chunks:
        by_unit[(c.book_id, c.unit_id)].append(c)
    method = f"{base.method}+merge"
    chunks = []
    for book_id, doc in docs.items():
        for unit in doc.units:
            got = by_unit.pop((book_id, unit.unit_id), None)
            if not got:
                continue
            res = merge_unit_result(doc, unit, UnitResult(book_id, unit.unit_id, got), target=typed.target,
                                    measure=typed.measure, method=method)
            chunks.extend(res.chunks)
    if by_unit:
        raise ValueError(f"{label}: {len(by_unit)} units of {base.label!r} are not in the prepared books "
                         f"(e.g. {next(iter(by_unit))})")
    config = {"method": {**dict(base.config.get("method") or {}), "merge": opts},
              "fingerprint": {"name": method, "base": base.config.get("fingerprint"), **opts},
              "merged_from_run_row": base.label}
    return dataclasses.replace(base, label=label, method=method, chunks=chunks,
                               seconds=base.seconds + time.perf_counter() - t0, config=config,
                               unit_failures=list(base.unit_failures), warnings=list(base.warnings))


class ChunkSetBuilder:
    """Builds the chunk sets of one run, chunking each distinct base configuration once.

    ``build`` is :func:`litseg.rag.evaluation.sources.build_chunkset` (passed in so that tests can count
    calls). Sets read from files and the benchmark's sections are built as they are.
    """

    def __init__(self, build: Callable[..., "ChunkSet"]) -> None:
        self._build = build
        self._bases: dict[str, "ChunkSet"] = {}
        self.reused: dict[str, str] = {}  # label -> label of the chunk set it was merged from

    def __call__(self, spec: "ChunkerSpec", bench: "Benchmark", docs: Mapping[str, "Document"],
                 **options: Any) -> "ChunkSet":
        """The chunk set of ``spec``; ``options`` go to ``build`` (where the chunkers run)."""
        if spec.kind != "method":
            return self._build(spec, bench, docs, **options)
        base_method, merge = split_merge(spec.method)
        key = _key(base_method)
        if merge is None:
            cs = self._build(spec, bench, docs, **options)
            self._bases.setdefault(key, cs)
            return cs
        base = self._bases.get(key)
        if base is None:
            base_spec = dataclasses.replace(spec, label=f"{spec.label} (before merge)", method=base_method)
            base = self._build(base_spec, bench, docs, **options)
            self._bases[key] = base
        self.reused[spec.label] = base.label
        return merge_chunkset(spec.label, base, docs, merge)
