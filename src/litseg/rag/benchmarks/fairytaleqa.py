"""FairytaleQA from the per-story CSVs of its GitHub release (gold evidence: story sections)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from litseg.rag.benchmarks import benchmark
from litseg.rag.benchmarks.records import Benchmark, BenchmarkBook, Evidence, Question, Span
from litseg.annotation.fairytaleqa_story import read_story_sections
from litseg.utils.tables import cell_text, join_sections, read_table, unique_nonempty

# ------------------------------------------------------------------------------------ FairytaleQA
_FTQA_SPLITS = {"validation": "val", "valid": "val", "dev": "val"}
_FTQA_QCOLS = ("question", "cor_section", "answer1")


@benchmark("fairytaleqa", paths=("path",))
def load_fairytaleqa(path: str | Path | None = None, split: str = "val", *, unwrap_lines: bool = False,
                     hub: str | None = None) -> Benchmark:
    """FairytaleQA from the per-story CSVs of its GitHub release.

    ``path`` is the folder holding ``train/``, ``val/`` (and ``test/``), or one split folder.
    Each ``<story>-story.csv`` has columns ``section,text``; the story text is the sections joined
    by a blank line, with line endings normalised (several stories use bare ``\\r``).
    ``unwrap_lines`` also joins hard-wrapped lines inside paragraphs; it replaces one character by
    one, so offsets stay valid either way. Each ``<story>-questions.csv`` gives ``question``,
    ``answer1``..``answer6`` (two annotators, up to three answers each) and ``cor_section``, the
    comma-separated gold section ids, which become span evidence.

    The hub copy (``WorkInTheDark/FairytaleQA``) holds only each question's section text, not
    whole stories with section ids, so ``hub=`` is refused with an explanation.
    """
    if hub is not None:
        raise ValueError("FairytaleQA on the hub stores only the text of each question's own "
                         "section(s), not whole stories with section ids; download the per-story "
                         "CSVs (github.com/WorkInTheDark/FairytaleQA_Dataset, split_for_training/) "
                         "and pass their folder as `path`")
    if path is None:
        raise ValueError("load_fairytaleqa needs the folder of the per-story CSVs")
    root = Path(path)
    split = _FTQA_SPLITS.get(split, split)
    folder = root / split if (root / split).is_dir() else root
    story_files = sorted(folder.glob("*-story.csv"))
    if not story_files:
        raise FileNotFoundError(f"no *-story.csv files in {folder}")
    books: list[BenchmarkBook] = []
    questions: list[Question] = []
    warnings: list[str] = []
    for sf in story_files:
        story_id = sf.name[: -len("-story.csv")]
        ids, parts = read_story_sections(sf, unwrap_lines, warnings)
        text, spans = join_sections(parts)
        books.append(BenchmarkBook(book_id=story_id, title=story_id.replace("-", " "), text=text,
                                   sections=spans, section_labels=ids, meta={"source": str(sf)}))
        qf = sf.with_name(f"{story_id}-questions.csv")
        if not qf.is_file():
            warnings.append(f"{story_id}: no questions file {qf.name}")
            continue
        by_id: dict[str, list[Span]] = {}
        for sid, span in zip(ids, spans):
            by_id.setdefault(sid, []).append(span)
        questions.extend(_read_story_questions(qf, story_id, by_id, warnings))
    return Benchmark(name=f"fairytaleqa/{split}", books=books, questions=questions, warnings=warnings,
                     meta={"split": split})


def _read_story_questions(path: Path, story_id: str, section_spans: Mapping[str, list[Span]],
                          warnings: list[str]) -> list[Question]:
    rows = read_table(path)
    if not rows:
        return []
    missing = [c for c in _FTQA_QCOLS if c not in rows[0]]
    if missing:
        raise ValueError(f"{path}: missing columns {missing} (found {list(rows[0])})")
    out: list[Question] = []
    used: Counter[str] = Counter()
    for n, r in enumerate(rows, 2):
        qtext = cell_text(r.get("question"))
        if not qtext:
            warnings.append(f"{path.name}:{n}: empty question skipped")
            continue
        raw_id = cell_text(r.get("question_id")) or str(n - 1)
        used[raw_id] += 1
        qid = f"{story_id}-q{raw_id}" + (f".{used[raw_id]}" if used[raw_id] > 1 else "")
        if used[raw_id] > 1:
            warnings.append(f"{path.name}:{n}: question_id {raw_id} repeated; kept as {qid}")
        evidence = []
        for sec in (x.strip() for x in cell_text(r.get("cor_section")).split(",")):
            if not sec:
                continue
            if sec not in section_spans:
                warnings.append(f"{path.name}:{n}: cor_section {sec!r} is not a section of the story")
                continue
            for s, e in section_spans[sec]:
                evidence.append(Evidence(kind="span", start=s, end=e, label=f"section {sec}"))
        answers = unique_nonempty(cell_text(r.get(f"answer{i}")) for i in range(1, 7))
        meta = {k: cell_text(r.get(k)) for k in ("question_id", "local-or-sum", "attribute1", "attribute2",
                                          "ex-or-im1", "ex-or-im2", "cor_section") if k in r}
        out.append(Question(qid=qid, book_id=story_id, question=qtext, answers=answers,
                            evidence=evidence, meta=meta))
    return out

