"""Segmentations made elsewhere (a teacher on another machine or an API, human gold, another
tool), imported into a run directory of this project's own units and sentences.

The format (one JSON object a line; docs/importing.md):

``uid``           unique id of the record (named in every message about it)
``source``        the file the text comes from, relative to ``source_root`` (or absolute);
                  optional: without it, or when it cannot be read, the record's text stands alone
``book_id``       optional book id (default: from the source file name, else the uid)
``unit_start``    optional offset hint of ``text`` in the decoded source (picks among repeats)
``text``          the annotated text, exactly as it appears in the source
``sentences``     ``[[start, end], ...]``: offsets into ``text`` of the sentences [1]..[N] the
                  annotator saw
``annotation``    ``{"step1": {...}, "step2": {...}, "step3": {"chapter_title", "step_3_turning_points",
                  "segments": [{subtitle, from_idx, to_idx, context_idx}]}}`` (the teacher's three
                  stages), or simply ``{"segments": [...]}``

The annotation is defined by character spans, not by the annotator's sentence numbers: the
record's text is located in the source as this project reads it, every segment becomes the span
of its sentences, and each *current* sentence of each *current* unit joins the segment whose main
range holds its first character. A change of sentence splitter or of unit cap therefore keeps an
annotation usable. Each mapped answer then goes through the same parse -> validate -> repair path
as a model's answer (every repair counted), and the run directory is written like any
``annotate.py`` run, so ``train.py data.runs=[...]`` reads it.

Nothing is dropped silently: a record that cannot be read or located stops the import with a
message naming the record (and the first offset where its text and the source differ); a current
unit that the annotations cover only in part is listed under ``partial_units`` in the summary
(with the share covered) and not written.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from litseg.chunkers.base import Chunker, ChunkerGroups, UnitResult, method_settings
from litseg.chunkers.imported import ImportedConfig
from litseg.chunkers.llm_common import sentence_word_counts
from litseg.llm.base import Completion
from litseg.annotation.fairytaleqa_story import fairytaleqa_story_text
from litseg.annotation.sources import BookSource
from litseg.segmentation.reading import slugify
from litseg.segmentation.reconstruct import build_chunks
from litseg.segmentation.runner import segment_with_retries
from litseg.segmentation.schema import get_schema
from litseg.segmentation.types import Document, Unit

log = logging.getLogger(__name__)

#: What a reading function makes of a source file: the decoded text, or None (not a kind it reads).
SourceText = Callable[[Path], "str | None"]


class ImportError_(ValueError):
    """A record that cannot be imported; the message names it."""


# --------------------------------------------------------------------------------------------
# The record format


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class ImportedSegment(BaseModel):
    model_config = ConfigDict(extra="forbid")
    subtitle: str = ""
    from_idx: int
    to_idx: int
    context_idx: list[int] = Field(default_factory=list)


class ImportedStep3(_Loose):
    chapter_title: str = ""
    step_3_turning_points: list[dict[str, Any]] = Field(default_factory=list)
    segments: list[ImportedSegment]


class ImportRecord(BaseModel):
    model_config = ConfigDict(extra="allow")
    uid: str
    text: str
    sentences: list[tuple[int, int]]
    annotation: dict[str, Any]
    source: str | None = None
    book_id: str | None = None
    unit_start: int | None = None
    unit_title: str | None = None

    @field_validator("sentences")
    @classmethod
    def _ordered(cls, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        if not spans:
            raise ValueError("no sentences")
        prev_end = 0
        for i, (s, e) in enumerate(spans, 1):
            if not (prev_end <= s < e):
                raise ValueError(f"sentence {i} [{s}, {e}] is empty, reversed or overlaps the previous one")
            prev_end = e
        return spans

    def step3(self) -> ImportedStep3:
        a = self.annotation
        return ImportedStep3.model_validate(a.get("step3") if isinstance(a.get("step3"), Mapping) else a)

    def stage_text(self, stage: str, key: str) -> str:
        """``key`` of the record's ``stage`` block (a record without the block: of the record
        itself), as text; a field the record leaves out is empty."""
        block = self.annotation.get(stage)
        source = block if isinstance(block, Mapping) else self.annotation
        value = source[key] if key in source else ""
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def read_records(path: str | Path) -> list[ImportRecord]:
    """Every record of a JSONL file, checked; the first bad one stops with its line and uid."""
    records: list[ImportRecord] = []
    seen: dict[str, int] = {}
    with Path(path).open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path} line {lineno}"
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ImportError_(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
            uid = raw.get("uid") if isinstance(raw, dict) else None
            where = f"{where} (uid {uid!r})" if uid is not None else where
            try:
                rec = ImportRecord.model_validate(raw)
                step3 = rec.step3()
            except ValidationError as exc:
                first = exc.errors()[0]
                loc = ".".join(str(x) for x in first["loc"])
                raise ImportError_(f"{where}: {loc}: {first['msg']}") from None
            if rec.sentences[-1][1] > len(rec.text):
                raise ImportError_(f"{where}: sentence {len(rec.sentences)} ends at {rec.sentences[-1][1]}, "
                                   f"past the end of the text ({len(rec.text)} characters)")
            n = len(rec.sentences)
            for k, seg in enumerate(step3.segments, 1):
                bad = [i for i in (seg.from_idx, seg.to_idx, *seg.context_idx) if not 1 <= i <= n]
                if bad or seg.from_idx > seg.to_idx:
                    raise ImportError_(f"{where}: segment {k} [{seg.from_idx}, {seg.to_idx}] context "
                                       f"{seg.context_idx} is outside 1..{n} or reversed")
            if not step3.segments:
                raise ImportError_(f"{where}: no segments")
            if rec.uid in seen:
                raise ImportError_(f"{where}: uid repeats line {seen[rec.uid]}")
            seen[rec.uid] = lineno
            records.append(rec)
    if not records:
        raise ImportError_(f"{path}: no records")
    return records


# --------------------------------------------------------------------------------------------
# Locating a record's text in its source


def first_difference(a: str, b: str) -> int:
    """Index of the first character where ``a`` and ``b`` differ (``min(len)`` if one is a prefix)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # binary search on equal prefixes: O(n log n) worst case, fast in practice
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def locate(text: str, source: str, hint: int | None, label: str) -> int:
    """Offset of ``text`` in ``source`` (the occurrence nearest ``hint``); a clear error if absent."""
    hits: list[int] = []
    pos = source.find(text)
    while pos != -1 and len(hits) < 64:
        hits.append(pos)
        pos = source.find(text, pos + 1)
    if hits:
        return min(hits, key=lambda p: abs(p - (hint or 0)))
    if hint is not None and 0 <= hint < len(source):
        at = hint
    else:  # the position where the longest prefix of the text occurs
        lo, hi, at = 1, len(text), 0
        while lo <= hi:
            mid = (lo + hi) // 2
            p = source.find(text[:mid])
            if p != -1:
                at, lo = p, mid + 1
            else:
                hi = mid - 1
    k = first_difference(text, source[at:at + len(text)])
    return _fail(label, k, at, text, source)


def _fail(label: str, k: int, at: int, text: str, source: str) -> int:
    raise ImportError_(
        f"{label}: the text is not in its source; aligned at source offset {at}, it first differs at "
        f"record offset {k} (source offset {at + k}): record has {text[k:k + 40]!r}, source has "
        f"{source[at + k:at + k + 40]!r}")


# --------------------------------------------------------------------------------------------
# Mapping by character spans


@dataclass
class Located:
    """A record placed in its document: absolute sentence spans and the segments over them."""

    record: ImportRecord
    offset: int
    starts: list[int] = field(default_factory=list)  # absolute start of each record sentence

    @property
    def start(self) -> int:
        return self.offset + self.record.sentences[0][0]

    @property
    def end(self) -> int:
        return self.offset + self.record.sentences[-1][1]

    def sentence_at(self, pos: int) -> int | None:
        """1-based record sentence that holds ``pos`` (or whose gap before the next holds it)."""
        if not self.start <= pos < self.end:
            return None
        return bisect.bisect_right(self.starts, pos)


@dataclass
class MappedUnit:
    """A current unit's imported answer (in stage-3 form) and how the mapping went."""

    answer: dict[str, Any]
    stages: dict[str, Any]
    records: list[str]
    notes: list[str]


def map_unit(doc: Document, unit: Unit, located: Sequence[Located]) -> tuple[MappedUnit | None, float]:
    """The unit's segmentation from the records covering it; ``(None, covered share)`` if partial."""
    owners: list[tuple[Located, int] | None] = []
    for s in unit.sentences:
        hit = None
        for loc in located:
            j = loc.sentence_at(s.start)
            if j is not None:
                hit = (loc, j)
                break
        owners.append(hit)
    covered = sum(o is not None for o in owners)
    if not unit.sentences or covered < len(unit.sentences):
        return None, covered / max(1, len(unit.sentences))
    # Record segment -> first/last current sentence whose start lies in its main range.
    spans: dict[tuple[str, int], list[int]] = {}
    order: list[tuple[str, int]] = []
    by_uid = {loc.record.uid: loc for loc in located}
    for i, (loc, j) in enumerate(owners, 1):  # type: ignore[misc]
        for k, seg in enumerate(loc.record.step3().segments):
            if seg.from_idx <= j <= seg.to_idx:
                key = (loc.record.uid, k)
                if key not in spans:
                    spans[key] = [i, i]
                    order.append(key)
                spans[key][1] = i
    notes: list[str] = []
    segments: list[dict[str, Any]] = []
    for uid, k in order:
        loc = by_uid[uid]
        seg = loc.record.step3().segments[k]
        context = sorted({c for idx in seg.context_idx if (c := _current_index(unit, loc, idx)) is not None})
        first, last = spans[(uid, k)]
        segments.append({"subtitle": seg.subtitle, "from_idx": first, "to_idx": last, "context_idx": context})
    used = {uid for uid, _ in order}
    for loc in located:
        n_segs = len(loc.record.step3().segments)
        kept = sum(1 for uid, _ in order if uid == loc.record.uid)
        if loc.record.uid in used and kept < n_segs:
            notes.append(f"{loc.record.uid}: {n_segs - kept} segment(s) hold no current sentence start "
                         "(merged into a neighbour by the sentence split)")
    first = by_uid[order[0][0]].record if order else located[0].record
    s3 = first.step3()
    answer = {"chapter_title": s3.chapter_title, "step_3_turning_points": s3.step_3_turning_points,
              "segments": segments}
    recs = [by_uid[u].record for u in dict.fromkeys(u for u, _ in order)]
    stages = {
        "stage1": {"status": "ok", "answer": {"step_1_events": "\n".join(r.stage_text("step1", "step_1_events")
                                                                         for r in recs).strip()}},
        "stage2": {"status": "ok", "answer": {"step_2_threads": "\n".join(r.stage_text("step2", "step_2_threads")
                                                                          for r in recs).strip()}},
    }
    return MappedUnit(answer, stages, [r.uid for r in recs], notes), 1.0


def _current_index(unit: Unit, loc: Located, record_idx: int) -> int | None:
    """The current sentence of ``unit`` that holds the start of record sentence ``record_idx``."""
    pos = loc.offset + loc.record.sentences[record_idx - 1][0]
    if not unit.sentences or not unit.sentences[0].start <= pos < unit.sentences[-1].end:
        return None
    return bisect.bisect_right([s.start for s in unit.sentences], pos)


# --------------------------------------------------------------------------------------------
# Source texts


def fairytaleqa_story(path: Path) -> str | None:
    """A FairytaleQA ``*-story.csv`` read as the benchmark reads it (sections, blank line between)."""
    if not path.name.endswith("-story.csv"):
        return None
    return fairytaleqa_story_text(path)


#: Readers tried in order for a source that is not a book file (.txt/.md/.epub/.html).
SOURCE_READERS: list[SourceText] = [fairytaleqa_story]


def resolve_source(source: str | None, roots: Sequence[Path]) -> Path | None:
    if not source:
        return None
    p = Path(source).expanduser()
    if p.is_absolute():
        return p if p.is_file() else None
    for root in roots:
        if (root / p).is_file():
            return root / p
    return None


def default_roots(annotations: Path, source_root: str | None) -> list[Path]:
    """``source_root`` if given, else the annotation file's folder and each folder above it."""
    if source_root:
        return [Path(source_root).expanduser()]
    here = annotations.resolve().parent
    return [here, *here.parents]


# --------------------------------------------------------------------------------------------
# The chunker that replays imported answers


class ImportedChunker(Chunker):
    """Writes imported segmentations through the project's own validation, repair and records.

    Used by ``annotate.py method=imported method.annotations=FILE``: :meth:`book_sources`
    replaces ``input=`` (the books are the records' sources), and each unit's "answer" is the
    mapped annotation.
    """

    def __init__(self, annotations: str, **settings: Any) -> None:
        """``settings`` are the other fields of :class:`ImportedConfig`; one left out is read from
        conf/method/imported.yaml (:func:`~litseg.chunkers.base.method_settings`)."""
        config = method_settings(ImportedConfig, "imported", {**settings, "annotations": annotations})
        self.name = config.name
        self.path = Path(annotations).expanduser()
        if not self.path.is_file():
            raise FileNotFoundError(f"method.annotations: no such file {self.path}")
        self.records = read_records(self.path)
        self.roots = default_roots(self.path, config.source_root)
        self.origin = config.origin
        self.fallback_max_words = config.fallback_max_words
        self.context_position = config.context_position
        self.answer_model = get_schema("stage3")
        self.sha256 = hashlib.sha256(self.path.read_bytes()).hexdigest()
        self._mapped: dict[tuple[str, str], MappedUnit] = {}
        self.partial_units: list[dict[str, Any]] = []
        self.standalone: list[str] = []

    def fingerprint(self) -> dict[str, Any]:
        return {"name": self.name, "annotations_sha256": self.sha256, "origin": self.origin,
                "fallback_max_words": self.fallback_max_words, "context_position": self.context_position}

    def summary(self) -> dict[str, Any]:
        return {"import": {"annotations": str(self.path), "records": len(self.records), "origin": self.origin,
                           "partial_units": self.partial_units, "standalone_records": self.standalone}}

    # ------------------------------------------------------------------ books
    def book_sources(self, prepare: Callable[[Any], Document]) -> list[BookSource]:
        groups: dict[str, list[ImportRecord]] = {}
        for rec in self.records:
            path = resolve_source(rec.source, self.roots)
            key = str(path) if path is not None else f"record:{rec.uid}"
            groups.setdefault(key, []).append(rec)
        sources = []
        for key, recs in groups.items():
            label = key if not key.startswith("record:") else f"{self.path}#{recs[0].uid}"
            sources.append(BookSource(label, (lambda key=key, recs=recs, label=label: self._load(key, recs, label, prepare)),
                                      (lambda recs=recs: _records_hash(recs, self.sha256)), stored_text=True))
        return sources

    def _load(self, key: str, recs: list[ImportRecord], label: str, prepare: Callable[[Any], Document]) -> Document:
        doc = self._document(key, recs, label, prepare)
        located = []
        for rec in recs:
            offset = locate(rec.text, doc.text, rec.unit_start, f"record {rec.uid!r} ({label})")
            loc = Located(rec, offset, [offset + s for s, _ in rec.sentences])
            located.append(loc)
        units: list[Unit] = []
        for unit in doc.units:
            touching = [loc for loc in located if loc.start < unit.end and unit.start < loc.end]
            if not touching:
                continue
            mapped, share = map_unit(doc, unit, touching)
            if mapped is None:
                self.partial_units.append({"book_id": doc.book_id, "unit_id": unit.unit_id, "title": unit.title,
                                           "covered": round(share, 4),
                                           "records": [loc.record.uid for loc in touching]})
                log.warning("%s/%s (%s): annotations cover %.0f%% of its sentences; not imported (match the "
                            "annotator's units, e.g. preprocess.max_words)", doc.book_id, unit.unit_id,
                            unit.title, 100 * share)
                continue
            self._mapped[(doc.book_id, unit.unit_id)] = mapped
            units.append(unit)
        unplaced = [loc.record.uid for loc in located
                    if not any(loc.record.uid in m.records for m in self._mapped.values())]
        for uid in unplaced:
            log.warning("record %s: no current unit of %s is fully covered by it", uid, doc.book_id)
        doc.units = units
        return doc

    def _document(self, key: str, recs: list[ImportRecord], label: str, prepare: Callable[[Any], Document]) -> Document:
        book_id = recs[0].book_id
        if not key.startswith("record:"):
            path = Path(key)
            for reader in SOURCE_READERS:
                text = reader(path)
                if text is not None:
                    return prepare(Document(book_id=book_id or slugify(path.stem), text=text,
                                            title=path.stem, source_path=str(path), encoding="utf-8"))
            if path.suffix.lower() in {".txt", ".md", ".epub", ".html", ".htm", ".xhtml"}:
                doc = prepare(path)
                if book_id:
                    doc.book_id = book_id
                    for u in doc.units:
                        u.book_id = book_id
                return doc
        rec = recs[0]
        self.standalone.append(rec.uid)
        return prepare(Document(book_id=book_id or slugify(rec.uid), text=rec.text, title=rec.unit_title or "",
                                source_path=label, encoding="utf-8"))

    # ------------------------------------------------------------------ units
    def chunk_unit(self, doc: Document, unit: Unit) -> UnitResult:
        t0 = time.perf_counter()
        mapped = self._mapped[(doc.book_id, unit.unit_id)]
        reply = json.dumps(mapped.answer, ensure_ascii=False)

        def ask(_messages: list[dict[str, str]]) -> Completion:
            return Completion(text=reply, model=f"imported:{self.origin}")

        outcome = segment_with_retries(
            ask, [], n=unit.n_sentences, answer_model=self.answer_model,
            sentence_words=sentence_word_counts(doc, unit), max_fallback_words=self.fallback_max_words,
            max_retries=0, fallback="pieces")
        chunks = build_chunks(doc, unit, outcome.segments, method=self.name, context_position=self.context_position)
        diag = outcome.diagnostics.to_dict()
        stage3 = {"status": "ok" if outcome.diagnostics.fallback == "none" else outcome.diagnostics.fallback,
                  "answer": outcome.answer.model_dump() if outcome.answer is not None else None}
        diag.update(method=self.name, origin=self.origin, calls=0, seconds=time.perf_counter() - t0,
                    stages={**mapped.stages, "stage3": stage3}, imported_from=mapped.records,
                    notes=[*diag.get("notes", []), *mapped.notes],
                    segments=[s.model_dump() for s in outcome.segments])
        if outcome.answer is not None:
            diag["answer"] = outcome.answer.model_dump()
        return UnitResult(doc.book_id, unit.unit_id, chunks, diag)



def _records_hash(recs: Sequence[ImportRecord], salt: str) -> str:
    h = hashlib.sha256(salt.encode())
    for r in recs:
        h.update(r.uid.encode() + b"\0")
    return h.hexdigest()


def make_imported(config: ImportedConfig, groups: ChunkerGroups) -> ImportedChunker:
    """The factory of ``method=imported`` (registered by :mod:`litseg.chunkers.imported`)."""
    if not config.annotations:
        raise ValueError("method=imported needs method.annotations=FILE.jsonl (docs/importing.md)")
    return ImportedChunker(config.annotations, **config.options("annotations"))
