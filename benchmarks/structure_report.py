"""Structure report: the narrative units found in every shared text, against heading counts.

Runs ``find_units`` (no word cap, so structural units are counted) over every text listed in
``../shared/data/texts/manifest.tsv`` and over the Shakespeare Markdown plays, and writes
docs/structure.md: per text the units found by kind, the unit counts checked by reading the
text's headings (``EXPECTED`` below), the manifest's rough regex heading counts, and a verdict.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/structure_report.py            # writes docs/structure.md
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/structure_report.py --out -    # print instead

``EXPECTED`` holds counts checked by hand against each text's headings (title pages, contents
lists, prefaces, notes and appendices excluded; prologues and epilogues counted as units).
``KNOWN_MISSES`` explains every text whose result differs from them.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from litseg.segmentation.reading import read_document  # noqa: E402
from litseg.segmentation.units import find_units  # noqa: E402

# gutenberg id -> units by kind, checked by reading each text's headings.
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

# gutenberg id -> why the result differs from EXPECTED.
KNOWN_MISSES: dict[str, str] = {
    "2591": ("\"The Wedding of Mrs Fox\" consists of two stories whose titles (\"FIRST STORY\", "
             "\"SECOND STORY\") are listed in the contents like tales of their own, so the tale "
             "becomes two units (the tale's title opens the first one)."),
}

# Decisions that are not misses but worth knowing when reading the table.
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
]


@dataclass
class Result:
    name: str
    gid: str
    title: str
    found: dict[str, int]
    expected: dict[str, int] | None
    manifest: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    front_words: int = 0
    body_words: int = 0

    @property
    def verdict(self) -> str:
        if self.expected is None:
            return "unchecked"
        return "ok" if self.found == self.expected else "miss"


def analyse_text(path: Path, gid: str = "", manifest: dict[str, int] | None = None,
                 expected: dict[str, int] | None = None) -> Result:
    t0 = time.perf_counter()
    doc = read_document(path)
    units = find_units(doc, max_words=10**9)
    seconds = time.perf_counter() - t0
    found = dict(Counter(u.kind for u in units))
    body = doc.text[doc.body_start:doc.body_end]
    return Result(name=path.name, gid=gid, title=doc.title or path.stem, found=found,
                  expected=expected if expected is not None else EXPECTED.get(gid),
                  manifest=manifest or {}, seconds=seconds,
                  front_words=len(doc.text[:doc.body_start].split()),
                  body_words=len(body.split()))


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


def run(texts: Path) -> tuple[list[Result], list[Result]]:
    with open(texts / "manifest.tsv", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    manifest_results = []
    for row in rows:
        counts = json.loads(row["heading_counts"] or "{}")
        r = analyse_text(texts / row["file"], row["gutenberg_id"], counts)
        r.title = row["title"] or r.title
        manifest_results.append(r)
    md_results = []
    for path in sorted((texts / "shakespeare_markdown").glob("*/*.md")):
        md_results.append(analyse_text(path, "", None,
                                       markdown_expected(path.read_text(encoding="utf-8"))))
    return manifest_results, md_results


def _fmt(d: dict[str, int] | None) -> str:
    if d is None:
        return "-"
    return ", ".join(f"{k} {v}" for k, v in sorted(d.items(), key=lambda kv: -kv[1])) or "none"


def render(manifest_results: list[Result], md_results: list[Result]) -> str:
    ok = sum(r.verdict == "ok" for r in manifest_results)
    md_ok = sum(r.verdict == "ok" for r in md_results)
    total_s = sum(r.seconds for r in manifest_results + md_results)
    lines = [
        "# Structure report",
        "",
        "Generated by `benchmarks/structure_report.py` (run it to refresh this file). For every "
        "text listed in `../shared/data/texts/manifest.tsv`, `find_units` (no word cap) gives the "
        "narrative units by kind. *Checked* are unit counts established by reading each text's "
        "headings (contents lists, prefaces, notes and appendices excluded); *manifest* are the "
        "rough regex counts shipped with the texts, shown only as a hint (they count contents "
        "entries, miss unnumbered headings and are sometimes empty). *Front words* are the words "
        "before the body (licence header, title page, contents, preface).",
        "",
        f"**{ok} of {len(manifest_results)} manifest texts match the checked counts; "
        f"{md_ok} of {len(md_results)} Shakespeare Markdown plays match their scene, prologue "
        f"and epilogue headings.** Total time {total_s:.1f} s on one core.",
        "",
        "| id | title | units found | checked | manifest | front words | body words | verdict |",
        "|---|---|---|---|---|---:|---:|---|",
    ]
    for r in manifest_results:
        lines.append(f"| {r.gid} | {r.title} | {_fmt(r.found)} | {_fmt(r.expected)} | "
                     f"{_fmt(r.manifest)} | {r.front_words} | {r.body_words} | {r.verdict} |")
    lines += ["", "## How units are found", "",
              "- **Boilerplate.** The Project Gutenberg header (modern `*** START OF ...` markers, "
              "also wrapped over two lines, and the old `*END*THE SMALL PRINT` licence) and the "
              "footer (`*** END OF ...`, `End of the Project Gutenberg ...`, `START: FULL "
              "LICENSE`) are cut off, as are transcriber credits right after the header. Texts "
              "without markers keep everything.",
              "- **Headings.** Short paragraphs are matched against heading patterns: keyword and "
              "number in many spellings (`CHAPTER I.`, `Chapter the First`, `Book the First--...`, "
              "`FIRST ACT`, `ACT FIRST.`, `Fit the Fourth`, `Inferno: Canto I`), bare or titled "
              "numerals (`XIV`, `I. The Period`), prologue/epilogue/prelude/introduction, Markdown "
              "`#` headings, and headings printed as picture captions. A title on the next line "
              "(`1` / `The Old Sea-dog ...`, `CHAPTER I` / `TREATS OF ...`) joins the heading.",
              "- **Contents lists.** A heading counts only when running text follows it, directly "
              "or through a deeper heading (`BOOK ONE` -> `I.` -> text). Contents entries have "
              "nothing between them, so they drop out; numbers must also run in sequence, which "
              "removes a contents tail that happens to precede a cast list.",
              "- **Units and containers.** One kind becomes the unit: scenes before acts, then "
              "chapter-like keywords, then titled and bare numerals, then books, parts, volumes. "
              "Shallower kinds are containers recorded in `Unit.path`; deeper ones (numbered "
              "stanzas, sub-sections of a story) stay inside the units. Without any of these, "
              "titles listed under `Contents` and then upper-case titles after a wide gap are "
              "tried; without any heading the body is one unit. Prologues, epilogues and "
              "prefatory verse introductions are units of their own kind.",
              "- **Front and back matter.** Everything before the first kept heading (title page, "
              "contents, preface, dedication, cast list, illustrations) is front matter: outside "
              "the body and in no unit. `prepare_document(..., keep_front_matter=True)` turns it "
              "into one unit of kind `front_matter` instead. An appendix, notes, glossary or "
              "transcriber section after the last unit is back matter; so is a NOTES heading "
              "after which the units only repeat earlier numbers.",
              "- **Word cap.** Units longer than `max_words` are then split at blank lines, then "
              "sentence ends, then line breaks (ids `0007-01`, `0007-02`, ...); that step is not "
              "part of this table."]
    lines += ["", "## Misses", ""]
    misses = [r for r in manifest_results if r.verdict != "ok"]
    for r in misses:
        why = KNOWN_MISSES.get(r.gid, "UNEXPLAINED - a regression or a new heading style.")
        lines.append(f"- **{r.title}** ({r.gid}): found {_fmt(r.found)}, checked "
                     f"{_fmt(r.expected)}. {why}")
    if not misses:
        lines.append("- none")
    lines += ["", "## Notes on decisions", ""] + [f"- {n}" for n in NOTES]
    lines += ["", "## Shakespeare (Markdown `## ACT` / `### SCENE`)", "",
              "Units are scenes with the act in `Unit.path`; a prologue or epilogue with its own "
              "text is a unit, one that only encloses scenes (the Shrew's induction) is a "
              "container.", "",
              "| play | units found | headings | verdict |", "|---|---|---|---|"]
    for r in md_results:
        lines.append(f"| {r.name[:-3]} | {_fmt(r.found)} | {_fmt(r.expected)} | {r.verdict} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=Path, default=None, help="shared texts folder")
    ap.add_argument("--out", default=str(REPO / "docs" / "structure.md"),
                    help="output Markdown file, or - for stdout")
    args = ap.parse_args(argv)
    texts = args.texts or shared_texts()
    if not (texts / "manifest.tsv").is_file():
        print(f"no manifest at {texts}; set LITSEG_SHARED_DIR or pass --texts", file=sys.stderr)
        return 2
    manifest_results, md_results = run(texts)
    report = render(manifest_results, md_results)
    if args.out == "-":
        print(report, end="")
    else:
        Path(args.out).write_text(report, encoding="utf-8")
        ok = sum(r.verdict == "ok" for r in manifest_results)
        print(f"wrote {args.out}: {ok}/{len(manifest_results)} manifest texts match")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
