"""LitSeg-Tagger: a two-part student of the LitSeg teacher that runs on one CPU core.

The paper's student (``method=litseg_lite``) writes the whole segmentation as one JSON answer, one
token at a time; a 135M model on a CPU needs about a minute per chapter for that and, reading a
numbered chapter of 2,000 words, cuts at a near-regular rhythm. LitSeg-Tagger splits the job:

1. **Reading** (:mod:`litseg.chunkers.tagger_model`): the unit's sentences are embedded once by the
   frozen sentence encoder; a small boundary net trained on the teacher's cuts scores every
   sentence as the start of a block, in one pass over the unit, and the cuts are decoded from the
   scores with no fixed count (:mod:`litseg.segmentation.cut_decoding`). A context net picks, for
   each block, the earlier sentence the reader needs, when it is confident enough.
2. **Writing**: the chat model with the writer adapter (a LoRA trained on the teacher's blocks)
   reads each block's own sentences and names it: who does what. All blocks of the batch are asked
   at once. A subtitle equal to an earlier one of the same unit is asked again (sampled, with a
   fixed seed) until it differs; a repeat that survives is kept and counted, never rewritten.

The output contract is every chunker's: blocks cover the unit in order, spans are exact, and the
segments are validated before chunks are built. A unit the writer model could not be reached for
fails with no chunks (a rerun does it again); one that raises is recorded as a failure.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from litseg.chunkers.base import Chunker, ChunkerGroups, MethodConfig, UnitResult, register
from litseg.chunkers.groups import PromptConfig, WriterPrompt
from litseg.chunkers.llm_common import unit_paragraph_starts, unit_sentence_texts
from litseg.errors import ModelUnreachable, SetupError
from litseg.llm.base import ChatModel, ChatRequest, Completion
from litseg.models import MODELS_DIR
from litseg.segmentation.cut_decoding import blocks_from_cuts, decode_cuts
from litseg.segmentation.reconstruct import build_chunks
from litseg.segmentation.schema import Segment
from litseg.segmentation.types import Document, Unit
from litseg.segmentation.validation import blocking_issues, validate_segments
from litseg.embeddings import load_embedder

log = logging.getLogger(__name__)

_SPACE = re.compile(r"\s+")
_QUOTES = "\"'“”‘’`"
#: Characters a subtitle keeps at most (a runaway writer is cut here; the teacher's are under 160).
MAX_SUBTITLE_CHARS = 200
#: A repeated subtitle is asked again this many times at most, sampled at this temperature.
REWRITE_TRIES = 3
REWRITE_TEMPERATURE = 0.8


def encoder_text(sentence: str) -> str:
    """A sentence as the sentence encoder reads it (training and inference alike): one line."""
    return _SPACE.sub(" ", sentence).strip()


def resolve_tagger(value: str) -> Path:
    """A tagger folder: ``value`` itself when it is one, else a shipped tagger's name."""
    path = Path(value).expanduser()
    if not (path / "tagger.json").is_file():
        path = MODELS_DIR / value
    if not (path / "tagger.json").is_file():
        shipped = sorted(p.name for p in MODELS_DIR.iterdir() if (p / "tagger.json").is_file())
        raise SetupError(f"litseg_tagger: {value!r} is neither a tagger folder (with tagger.json) nor a shipped "
                         f"tagger ({', '.join(shipped) or 'none shipped'}); train one with "
                         "python train.py +experiment=tagger")
    return path


def clean_subtitle(text: str) -> str:
    """The writer's reply as a subtitle: its first line, outer quotes and spacing removed, bounded."""
    line = next((ln for ln in text.strip().splitlines() if ln.strip()), "")
    line = _SPACE.sub(" ", line).strip().strip(_QUOTES).strip()
    return line[:MAX_SUBTITLE_CHARS].rstrip()


def subtitle_key(subtitle: str) -> str:
    """What makes two subtitles the same (case and spacing aside), as the repeat measure counts."""
    return " ".join(subtitle.lower().split())


#: The answer "schema" of a writer prompt (conf/prompt/tagger_writer.yaml): one line of text.
WRITER_SCHEMA = "subtitle_line"


def writer_messages(prompt: WriterPrompt, texts: list[str], para: list[bool],
                    block: tuple[int, int]) -> list[dict[str, str]]:
    """The writer's chat messages for one block (training builds its examples with this too)."""
    from litseg.chunkers.tagger_model import block_text  # lazy: tagger_model imports torch

    text = block_text(texts, para, block, prompt.block_head_words, prompt.block_tail_words)
    return [{"role": "system", "content": prompt.system},
            {"role": "user", "content": prompt.user.format(block=text)}]


@dataclass
class _Pending:
    doc: Document
    unit: Unit
    blocks: list[tuple[int, int]]
    context: list[list[int]]
    texts: list[str]
    para: list[bool]
    started: float
    read_seconds: float
    scores: list[float]


class LitSegTaggerChunker(Chunker):
    def __init__(self, llm: ChatModel, prompt: PromptConfig, *, name: str, model: str,
                 threshold: float | None, min_block: int | None, max_context: int | None,
                 max_subtitle_tokens: int, distinct_subtitles: bool,
                 batch_units: int, context_position: str) -> None:
        if not isinstance(prompt, WriterPrompt):
            raise ValueError(f"prompt {getattr(prompt, 'name', prompt)!r} is no writer prompt (with "
                             "block_head_words): litseg_tagger needs prompt=tagger_writer")
        self.name = name
        self.llm = llm
        self.prompt = prompt
        self.folder = resolve_tagger(model)
        self.meta = json.loads((self.folder / "tagger.json").read_text(encoding="utf-8"))
        self.threshold = threshold
        self.min_block = min_block
        self.max_context = max_context
        self.max_subtitle_tokens = max_subtitle_tokens
        self.distinct_subtitles = distinct_subtitles
        self.batch_units = max(1, int(batch_units))
        self.context_position = context_position
        self._nets: Any = None
        self._embedder: Any = None
        self._lm: Any = None  # the causal LM read for sentence features, when the nets use them

    # -- set-up -----------------------------------------------------------------------------

    def _load(self) -> None:
        if self._nets is not None:
            return
        from litseg.chunkers.tagger_model import load_nets  # lazy: tagger_model imports torch

        encoder = self.meta["encoder"]
        self._embedder = load_embedder(None if encoder == "default" else encoder)
        self._nets = load_nets(self.folder, self.meta["nets"], self._embedder.dimension)
        s = self._nets.settings
        if s.lm_dim:
            from litseg.chunkers.tagger_lm import load_sentence_lm  # lazy: torch and transformers

            self._lm = load_sentence_lm(s.lm_model, s.lm_layers, s.lm_last_layers, s.lm_alone)
            if self._lm.width != s.lm_dim:
                raise SetupError(f"litseg_tagger: {self.folder} was trained on {s.lm_dim} LM features per sentence; "
                                 f"{s.lm_model!r} gives {self._lm.width}")
        if self.threshold is not None:
            s.threshold = float(self.threshold)
        if self.min_block is not None:
            s.min_block = int(self.min_block)
        if self.max_context is not None:
            s.max_context = int(self.max_context)

    def check(self) -> None:
        self.llm.check()
        self._load()

    def fingerprint(self) -> dict[str, Any]:
        return {"name": self.name, "tagger": self.meta.get("name", self.folder.name),
                "tagger_digest": self.meta.get("digest"), "writer": self.llm.identity(),
                "prompt": self.prompt.version, "threshold": self.threshold,
                "min_block": self.min_block, "max_context": self.max_context,
                "max_subtitle_tokens": self.max_subtitle_tokens,
                "distinct_subtitles": self.distinct_subtitles, "context_position": self.context_position}

    def close(self) -> None:
        self.llm.close()

    # -- chunking -----------------------------------------------------------------------------

    def chunk_unit(self, doc: Document, unit: Unit) -> UnitResult:
        return next(iter(self.chunk_many([(doc, unit)])))

    def chunk_units(self, doc: Document, units: Iterable[Unit]) -> Iterator[UnitResult]:
        yield from self.chunk_many((doc, u) for u in units)

    def chunk_many(self, items: Iterable[tuple[Document, Unit]]) -> Iterator[UnitResult]:
        """Units of any number of books, ``batch_units`` at a time: one encoder call and one batch
        of writer requests per group."""
        self._load()
        group: list[tuple[Document, Unit]] = []
        for item in items:
            group.append(item)
            if len(group) >= self.batch_units:
                yield from self._chunk_group(group)
                group = []
        if group:
            yield from self._chunk_group(group)

    def _read(self, group: list[tuple[Document, Unit]]) -> list[_Pending]:
        """Blocks and context of every unit of the group (the reading half)."""
        import torch

        t0 = time.perf_counter()
        texts = [unit_sentence_texts(d, u) for d, u in group]
        flat = [encoder_text(t) for ts in texts for t in ts]
        vectors = torch.tensor(self._embedder.encode(flat)) if flat else torch.zeros(0, self._embedder.dimension)
        encode_seconds = time.perf_counter() - t0
        out, at = [], 0
        s = self._nets.settings
        for (doc, unit), ts in zip(group, texts):
            t1 = time.perf_counter()
            emb = vectors[at:at + len(ts)]
            at += len(ts)
            para = unit_paragraph_starts(doc, unit)
            lm = self._lm.features(ts, para) if self._lm is not None and ts else None
            scores = self._nets.scores(ts, para, emb, lm) if ts else []
            cuts = decode_cuts(scores, threshold=s.threshold, min_block=s.min_block)
            blocks = blocks_from_cuts(cuts, len(ts))
            context = [self._nets.context_for(ts, para, emb, b) for b in blocks]
            share = encode_seconds * len(ts) / max(1, len(flat))
            out.append(_Pending(doc, unit, blocks, context, ts, para, t1, share + time.perf_counter() - t1, scores))
        return out

    def _messages(self, p: _Pending, block: tuple[int, int]) -> list[dict[str, str]]:
        return writer_messages(self.prompt, p.texts, p.para, block)

    def _ask(self, requests: list[ChatRequest]) -> list[Completion]:
        answers = self.llm.chat_batch(requests) if requests else []
        for a in answers:
            if a.error and a.error_kind == "unavailable":
                raise ModelUnreachable(f"writer model unreachable: {a.error}")
        return answers

    def _write(self, pending: list[_Pending]) -> list[tuple[list[str], list[Completion]]]:
        """Subtitles of every block, asked in one batch; repeats within a unit asked again."""
        requests = [ChatRequest(messages=self._messages(p, b), max_tokens=self.max_subtitle_tokens)
                    for p in pending for b in p.blocks]
        answers = self._ask(requests)
        out, at = [], 0
        for p in pending:
            mine = answers[at:at + len(p.blocks)]
            at += len(p.blocks)
            out.append(([clean_subtitle(a.text) for a in mine], list(mine)))
        if self.distinct_subtitles:
            self._rewrite_repeats(pending, out)
        return out

    def _rewrite_repeats(self, pending: list[_Pending], written: list[tuple[list[str], list[Completion]]]) -> None:
        """A subtitle equal to an earlier one of its unit (or empty) is asked again, sampled with a
        fixed seed, up to ``REWRITE_TRIES`` times, until it differs; what still repeats stays and is
        counted by the repeat measure (never hidden)."""
        for attempt in range(1, REWRITE_TRIES + 1):
            todo: list[tuple[int, int]] = []
            for ui, (subs, _) in enumerate(written):
                seen: set[str] = set()
                for bi, sub in enumerate(subs):
                    if not sub or subtitle_key(sub) in seen:
                        todo.append((ui, bi))
                    seen.add(subtitle_key(sub))
            if not todo:
                return
            requests = [ChatRequest(messages=self._messages(pending[ui], pending[ui].blocks[bi]),
                                    max_tokens=self.max_subtitle_tokens, temperature=REWRITE_TEMPERATURE,
                                    seed=attempt) for ui, bi in todo]
            for (ui, bi), answer in zip(todo, self._ask(requests)):
                earlier = {subtitle_key(x) for x in written[ui][0][:bi]}
                candidate = clean_subtitle(answer.text)
                if candidate and subtitle_key(candidate) not in earlier:
                    written[ui][0][bi] = candidate
                written[ui][1].append(answer)

    def _chunk_group(self, group: list[tuple[Document, Unit]]) -> Iterator[UnitResult]:
        try:
            pending = self._read(group)
            t0 = time.perf_counter()
            written = self._write(pending)
            write_seconds = time.perf_counter() - t0
        except SetupError:
            raise
        except ModelUnreachable as exc:
            for doc, unit in group:
                yield self._failed(doc, unit, f"model unreachable: {exc}", unreachable=True)
            return
        except Exception as exc:  # noqa: BLE001 - recorded on every unit of the group; the run goes on
            log.exception("%s: a group of %d units failed", self.name, len(group))
            for doc, unit in group:
                yield self._failed(doc, unit, f"{type(exc).__name__}: {exc}")
            return
        for p, (subtitles, answers) in zip(pending, written):
            yield self._result(p, subtitles, answers, write_seconds)

    def _failed(self, doc: Document, unit: Unit, error: str, unreachable: bool = False) -> UnitResult:
        diag = {"method": self.name, "error": error, "fallback": "none", "tries": 0, "calls": 0,
                **({"unreachable": True} if unreachable else {})}
        return UnitResult(doc.book_id, unit.unit_id, [], diag, error=error)

    def _result(self, p: _Pending, subtitles: list[str], answers: list[Completion], write_seconds: float) -> UnitResult:
        segments = [Segment(subtitle=sub, from_idx=a, to_idx=b, context_idx=ctx)
                    for (a, b), sub, ctx in zip(p.blocks, subtitles, p.context)]
        issues = blocking_issues(validate_segments(segments, p.unit.n_sentences)) if segments else []
        if issues:  # the decoder only makes covering blocks: this would be a bug, never hidden
            return self._failed(p.doc, p.unit, f"invalid blocks: {[i.message for i in issues]}")
        chunks = build_chunks(p.doc, p.unit, segments, method=self.name,
                              tokenizer=self.llm.chunk_tokenizer(), context_position=self.context_position)
        writer_seconds = sum(float(a.seconds or 0.0) for a in answers)
        diag = {
            "method": self.name, "tries": 1, "calls": len(answers), "fallback": "none", "first_try_valid": True,
            "n_blocks": len(segments), "segments": [s.model_dump() for s in segments],
            "prompt_tokens": sum(a.prompt_tokens for a in answers),
            "completion_tokens": sum(a.completion_tokens for a in answers),
            "rewritten_subtitles": max(0, len(answers) - len(segments)),
            # answers replayed by the response cache carry the seconds of the run that asked them
            "replayed_answers": sum(int(a.from_cache) for a in answers),
            "read_seconds": p.read_seconds, "writer_seconds": writer_seconds,
            # the model's own time for this unit: its reading plus its writer answers' share
            "model_seconds": p.read_seconds + writer_seconds,
            "seconds": time.perf_counter() - p.started,
        }
        return UnitResult(p.doc.book_id, p.unit.unit_id, chunks, diag)


@dataclass(kw_only=True)
class LitSegTaggerConfig(MethodConfig):
    """conf/method/litseg_tagger.yaml (the file holds every default)."""

    NEEDS: ClassVar[frozenset[str]] = frozenset({"llm", "prompt"})

    model: str
    threshold: float | None
    min_block: int | None
    max_context: int | None
    max_subtitle_tokens: int
    distinct_subtitles: bool
    batch_units: int
    context_position: str


@register("litseg_tagger", config=LitSegTaggerConfig)
def make_litseg_tagger(config: LitSegTaggerConfig, groups: ChunkerGroups) -> LitSegTaggerChunker:
    return LitSegTaggerChunker(groups.chat_model(), groups.prompt_section(), **config.options())
