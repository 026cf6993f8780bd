"""Structure report: the narrative units and the front/back matter of every shared text.

Runs ``find_units`` (no word cap, so structural units are counted) over every text of
``../shared/data/texts``: the texts of ``manifest.tsv``, the 37 texts of ``more/`` and the
Shakespeare Markdown plays. Per book it gives the top-level units found by kind against the
count checked by hand, the front and back matter spans with their reasons and word counts, and
the number of non-whitespace characters between the Project Gutenberg markers that are in no
unit and no matter span (always 0: nothing is lost) or in more than one. Units are found as the
pipeline finds them (``preprocess.index_matter`` on): the matter kept retrievable as units of its
own is marked ``*`` and counted apart from the narrative units, and the report checks that no
unit holds a character of a title page, contents list, credits, licence, advert or any other
matter that is never indexed.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/structure_report.py            # print the report
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/structure_report.py --write    # into docs/structure.md

``--write`` replaces only the generated block ``structure_report`` of docs/structure.md
(:mod:`litseg.utils.docblocks`); the prose around it is written by hand and holds
no figures. Hand-checked counts: ``EXPECTED`` below for the manifest texts, and
``benchmarks/data/more_true_units.tsv`` (with a note per book on what was counted) for more/;
the Markdown plays are checked against their scene, prologue and epilogue headings.
``KNOWN_MISSES`` explains every text whose count differs.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from litseg.segmentation.config import default_preprocess  # noqa: E402
from litseg.segmentation.gutenberg import gutenberg_frame  # noqa: E402
from litseg.segmentation.reading import read_document  # noqa: E402
from litseg.segmentation.gutenberg import gutenberg_bounds  # noqa: E402
from litseg.segmentation.structure import analyze_structure  # noqa: E402
from litseg.segmentation.types import NEVER_INDEXED, Document, Unit  # noqa: E402
from litseg.segmentation.units import units_from_structure  # noqa: E402
from litseg.utils.docblocks import write_block  # noqa: E402

MORE_TRUTH = REPO / "benchmarks" / "data" / "more_true_units.tsv"
DOC = REPO / "docs" / "structure.md"
BLOCK = "structure_report"

# gutenberg id -> units by kind, checked by reading each text's headings (manifest.tsv texts).
EXPECTED: dict[str, dict[str, int]] = {
    # narrative poems
    "26": {"book": 12},
    "1004": {"canto": 100},  # Inferno, Purgatorio, Paradiso as parts (Unit.path)
    "2199": {"book": 24},
    "3160": {"book": 24},
    "5077": {"introduction": 6, "canto": 6, "envoi": 1},  # each canto has a verse introduction
    "45888": {"canto": 6},  # numbered stanzas stay inside their canto
    "13": {"fit": 8},
    "1958": {"episode": 9},  # nine cantos named after the Muses, no numbers
    "58": {"book": 4},
    # plays
    "2542": {"act": 3},
    "4093": {"act": 4},
    "3825": {"act": 5},
    "844": {"act": 3},
    "1754": {"act": 4},
    "1756": {"act": 4},
    "14591": {"prelude": 1, "prologue": 1, "scene": 25},  # scenes are bare numerals I..XXV
    # novels and collections
    "98": {"chapter": 45},  # three books ("Book the First--Recalled to Life") as containers
    "1400": {"chapter": 59},
    "46": {"stave": 5},
    "11": {"chapter": 12},
    "76": {"chapter": 43},  # I..XLII and "CHAPTER THE LAST"
    "4078": {"chapter": 13},
    "120": {"chapter": 34},  # six parts, chapters are bare arabic numbers with a title line
    "43": {"episode": 10},  # chapter titles without numbers, listed under "Contents"
    "2554": {"chapter": 39, "epilogue": 1},
    "1260": {"chapter": 38},
    "219": {"chapter": 3},
    "36": {"chapter": 27},  # two books; misprinted "VI." for IV in book two
    "2591": {"episode": 63},  # 63 tales listed in the contents
    "1342": {"chapter": 61},
    "158": {"chapter": 55},  # three volumes, chapter numbers restart in each
    "1661": {"chapter": 12},  # twelve stories; numbered sub-sections stay inside them
    "5200": {"chapter": 3},
    "730": {"chapter": 53},
    "2701": {"chapter": 135, "epilogue": 1},
}

# gutenberg id (or Markdown play name) -> why the count found differs from the checked one.
KNOWN_MISSES: dict[str, str] = {}

# Decisions that are not misses but worth knowing when reading the tables.
NOTES: list[str] = [
    "Faust (14591): Goethe's verse dedication is headed only by the caption "
    "\"[Illustration: =Dedication=]\"; dedications are front matter by rule, so it is not a "
    "unit. The German poem \"AN GOETHE\" by the translator is front matter as well.",
    "Pygmalion (3825): Shaw's prose sequel follows Act V after a row of asterisks, without a "
    "heading, so it is the tail of the Act V unit.",
    "Marmion (5077): the editor's NOTES repeat the canto headings; the body ends at NOTES "
    "because the units after it only repeat numbers seen before.",
    "The Lady of the Lake (45888): the glossary and the study questions (again headed CANTO I "
    "to VI) are back matter; the numbered footnotes inside the cantos stay in the units.",
    "Great Expectations (1400): the three \"stages\" are marked only by a closing line, not a "
    "heading, so chapters have no container.",
    "Grimms' Fairy Tales (2591): the contents lists \"FIRST STORY\" and \"SECOND STORY\" under "
    "\"THE WEDDING OF MRS FOX\"; a series of ordinal labels is read as the parts of the entry "
    "above it, so the tale is one unit with two children.",
]


@dataclass
class Result:
    group: str  # "manifest", "more", "shakespeare"
    name: str
    gid: str
    title: str
    found: dict[str, int]
    expected: int | None
    expected_kinds: dict[str, int] | None = None
    note: str = ""
    seconds: float = 0.0
    body_words: int = 0
    matter: list[tuple[str, str, int]] = field(default_factory=list)  # (where, reason, words)
    indexed: list[tuple[str, str, int]] = field(default_factory=list)  # matter kept as units
    lost_chars: int = 0  # non-whitespace chars between the markers in no unit and no matter span
    double_chars: int = 0  # ... in more than one
    never_indexed_in_units: int = 0  # chars of title pages, contents, licence, adverts ... in a unit

    @property
    def n_found(self) -> int:
        return sum(self.found.values())

    @property
    def verdict(self) -> str:
        if self.expected is None:
            return "unchecked"
        return "ok" if self.n_found == self.expected else "miss"


def coverage(doc: Document, units: list[Unit]) -> tuple[int, int]:
    """(lost, doubled): non-whitespace characters between the Gutenberg markers that lie in no
    unit and no matter span, and those that lie in more than one."""
    begin, end, _ = gutenberg_frame(doc.text)
    spans = sorted([(u.start, u.end) for u in units] + [(m.start, m.end) for m in doc.matter])
    text = doc.text
    lost = doubled = 0
    pos = begin
    for s, e in spans:
        if s < pos:  # overlap with what came before
            doubled += sum(1 for c in text[s:min(e, pos)] if not c.isspace())
            s = pos
        if s > pos:
            lost += sum(1 for c in text[pos:min(s, end)] if not c.isspace())
        pos = max(pos, e)
    if pos < end:
        lost += sum(1 for c in text[pos:end] if not c.isspace())
    # a span reaching outside the markers would hold licence text: count it as doubled
    doubled += sum(1 for s, e in spans if s < begin or e > end)
    return lost, doubled


def analyse_text(path: Path, group: str, gid: str = "", expected: int | None = None,
                 expected_kinds: dict[str, int] | None = None, note: str = "") -> Result:
    t0 = time.process_time()
    doc = read_document(path)
    start, end = gutenberg_bounds(doc.text)
    structure = analyze_structure(doc.text, start, end, author=doc.author, title=doc.title)
    reading = default_preprocess()  # as annotate.py reads books (conf/preprocess/default.yaml), uncapped
    units = units_from_structure(doc, structure, max_words=10**9, keep_front_matter=reading.keep_front_matter,
                                 index_matter=reading.index_matter)
    seconds = time.process_time() - t0
    lost, doubled = coverage(doc, units)
    narrative = [u for u in units if not u.matter]
    never = [(m.start, m.end) for m in structure.matter if m.reason in NEVER_INDEXED]
    return Result(group=group, name=path.name, gid=gid, title=doc.title or path.stem,
                  found=dict(Counter(u.kind for u in narrative)), expected=expected,
                  expected_kinds=expected_kinds, note=note, seconds=seconds,
                  body_words=sum(len(doc.text[u.start:u.end].split()) for u in narrative),
                  matter=[(m.where, m.reason, m.words(doc.text)) for m in doc.matter],
                  indexed=[("front" if u.kind == "front_matter" else "back", u.matter,
                            len(doc.text[u.start:u.end].split())) for u in units if u.matter],
                  lost_chars=lost, double_chars=doubled,
                  never_indexed_in_units=_chars_inside(doc.text, never, units))


def _chars_inside(text: str, spans: list[tuple[int, int]], units: list[Unit]) -> int:
    """Non-whitespace characters of ``spans`` that lie inside a unit."""
    total = 0
    for s, e in spans:
        for u in units:
            lo, hi = max(s, u.start), min(e, u.end)
            if lo < hi:
                total += sum(1 for c in text[lo:hi] if not c.isspace())
    return total


# Markdown headings, and scene, prologue and epilogue headings the source printed without "#"
# marks ("SCENE II: Belmont." / "**Scene III**" / "EPILOGUE").
_PLAY_HEADING = re.compile(r"^(?:#+[ \t]+(?P<md>.*?)|(?:\*\*)?(?P<bare>SCENE[ \t]+[IVXLC]+\b.*?"
                           r"|(?-i:PROLOGUE|EPILOGUE)))[ \t]*$", re.M | re.I)


def markdown_expected(text: str) -> dict[str, int]:
    """Scene, prologue and epilogue headings of a Markdown play. A prologue with no text of its
    own before the next heading (an induction that holds scenes) encloses them, not a unit."""
    heads = list(_PLAY_HEADING.finditer(text))
    out: Counter[str] = Counter()
    for i, m in enumerate(heads):
        h = (m.group("md") or m.group("bare") or "").strip("*_ ").upper()
        if h.startswith("SCENE"):
            out["scene"] += 1
        elif h.startswith(("PROLOGUE", "EPILOGUE")):
            end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
            if text[m.end():end].strip():
                out[h.split(".")[0].split()[0].lower()] += 1
    return dict(out)


def shared_texts() -> Path:
    base = Path(os.environ.get("LITSEG_SHARED_DIR", REPO.parent / "shared"))
    return base / "data" / "texts"


def _read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def more_truth(path: Path = MORE_TRUTH) -> dict[str, dict[str, str]]:
    """gutenberg id -> row of the hand-checked counts for more/ (true_units, unit, note)."""
    return {r["gutenberg_id"]: r for r in _read_tsv(path)}


def run(texts: Path) -> list[Result]:
    results: list[Result] = []
    for row in _read_tsv(texts / "manifest.tsv"):
        kinds = EXPECTED.get(row["gutenberg_id"])
        r = analyse_text(texts / row["file"], "manifest", row["gutenberg_id"],
                         sum(kinds.values()) if kinds else None, kinds)
        r.title = row["title"] or r.title
        results.append(r)
    truth = more_truth()
    more_manifest = texts / "more" / "manifest.tsv"
    if more_manifest.is_file():
        for row in _read_tsv(more_manifest):
            t = truth.get(row["gutenberg_id"], {})
            n = int(t["true_units"]) if t.get("true_units") else None
            r = analyse_text(texts / row["file"], "more", row["gutenberg_id"], n,
                             note=t.get("unit", ""))
            r.title = row["title"] or r.title
            results.append(r)
    for path in sorted((texts / "shakespeare_markdown").glob("*/*.md")):
        kinds = markdown_expected(path.read_text(encoding="utf-8"))
        results.append(analyse_text(path, "shakespeare", path.stem, sum(kinds.values()), kinds))
    return results


def _fmt(d: dict[str, int] | None) -> str:
    if d is None:
        return "-"
    return ", ".join(f"{k} {v}" for k, v in sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))) or "none"


def _matter(r: Result, where: str) -> str:
    """Matter by reason with its words: what is in no unit, then (marked ``*``) what is kept as
    units of its own."""
    words: Counter[tuple[str, str]] = Counter()
    for mark, rows in (("", r.matter), ("*", r.indexed)):
        for w, reason, n in rows:
            if w == where:
                words[(reason, mark)] += n
    return ", ".join(f"{reason} {n}{mark}" for (reason, mark), n in words.items()) or "-"


def render_generated(results: list[Result]) -> str:
    by_group = {g: [r for r in results if r.group == g] for g in ("manifest", "more", "shakespeare")}
    checked = [r for r in results if r.expected is not None]
    ok = [r for r in checked if r.verdict == "ok"]
    lost = sum(r.lost_chars for r in results)
    doubled = sum(r.double_chars for r in results)
    total_s = sum(r.seconds for r in results)
    lines = [f"**Exact top-level unit count for {len(ok)} of {len(checked)} checked books "
             f"({100 * len(ok) / max(1, len(checked)):.1f} %).** "
             + "; ".join(f"{g}: {sum(r.verdict == 'ok' for r in rs)} of "
                         f"{sum(r.expected is not None for r in rs)}" for g, rs in by_group.items()) + ".",
             "",
             f"**Non-whitespace characters between the Gutenberg markers in no unit and no matter "
             f"span: {lost}; in more than one: {doubled}** (over {len(results)} texts). "
             f"Total CPU time {total_s:.1f} s on one core.", "",
             f"**Matter kept retrievable as units (`*`, `preprocess.index_matter`): "
             f"{sum(len(r.indexed) for r in results)} units, {sum(n for r in results for *_, n in r.indexed):,} "
             f"words. Characters of title pages, contents lists, credits, licences, adverts and other "
             f"matter that is never indexed inside a unit: {sum(r.never_indexed_in_units for r in results)}.**",
             ""]
    for group, heading in (("manifest", "Texts of `manifest.tsv`"), ("more", "Texts of `more/`")):
        rs = by_group[group]
        if not rs:
            continue
        lines += [f"### {heading}", "",
                  "| id | title | units found | checked | front matter (words) | back matter (words) "
                  "| body words | lost chars | verdict |",
                  "|---|---|---|---:|---|---|---:|---:|---|"]
        for r in rs:
            checked_cell = (f"{r.expected} ({_fmt(r.expected_kinds)})" if r.expected_kinds
                            else f"{r.expected} ({r.note})" if r.expected is not None and r.note
                            else str(r.expected) if r.expected is not None else "-")
            lines.append(f"| {r.gid} | {r.title} | {_fmt(r.found)} | {checked_cell} | "
                         f"{_matter(r, 'front')} | {_matter(r, 'back')} | {r.body_words} | "
                         f"{r.lost_chars} | {r.verdict} |")
        lines.append("")
    lines += ["### Misses", ""]
    misses = [r for r in checked if r.verdict != "ok"]
    for r in misses:
        why = KNOWN_MISSES.get(r.gid, "UNEXPLAINED - a regression or a new heading style.")
        lines.append(f"- **{r.title}** ({r.gid}): found {r.n_found} ({_fmt(r.found)}), checked "
                     f"{r.expected}. {why}")
    if not misses:
        lines.append("- none")
    lines += ["", "### Notes on decisions", ""] + [f"- {n}" for n in NOTES]
    lines += ["", "### Shakespeare (Markdown `## ACT` / `### SCENE`)", "",
              "| play | units found | headings | front matter (words) | lost chars | verdict |",
              "|---|---|---|---|---:|---|"]
    for r in by_group["shakespeare"]:
        lines.append(f"| {r.name[:-3]} | {_fmt(r.found)} | {_fmt(r.expected_kinds)} | "
                     f"{_matter(r, 'front')} | {r.lost_chars} | {r.verdict} |")
    return "\n".join(lines)


_TEMPLATE = """# Structure report

Written by hand around a block that `benchmarks/structure_report.py --write` generates.
"""


def write_doc(generated: str, path: Path = DOC) -> None:
    """Replace the generated block of ``path`` (create the file around it when missing)."""
    if not path.is_file():
        path.write_text(_TEMPLATE, encoding="utf-8")
    write_block(path, BLOCK, "benchmarks/structure_report.py --write", generated)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=Path, default=None, help="shared texts folder")
    ap.add_argument("--write", action="store_true", help=f"write the generated block into {DOC}")
    args = ap.parse_args(argv)
    texts = args.texts or shared_texts()
    if not (texts / "manifest.tsv").is_file():
        print(f"no manifest at {texts}; set LITSEG_SHARED_DIR or pass --texts", file=sys.stderr)
        return 2
    results = run(texts)
    generated = render_generated(results)
    if args.write:
        write_doc(generated)
        checked = [r for r in results if r.expected is not None]
        print(f"wrote {DOC}: {sum(r.verdict == 'ok' for r in checked)}/{len(checked)} books exact, "
              f"{sum(r.lost_chars for r in results)} characters lost")
    else:
        print(generated)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
