"""Compare sentence splitters on literary text: boundary F1 on the labelled cases, speed on a novel.

Run from the repository root (one core):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sentences.py
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sentences.py --only litseg,blingfire --markdown

Quality: ``tests/data/sentence_cases.jsonl`` (excerpts of the shared fiction, verse and drama, read from ../shared/data by offset, each
with its expected sentences) and ``tests/data/dialogue_cases.jsonl`` (dialogue-heavy fiction:
shout lists, speech tags after ellipses, present-tense and rarer speech verbs, action beats,
single capital letters; real excerpts and a few written for the project). A boundary is the
position, counted in non-whitespace characters, where a sentence starts (the first one excluded),
so splitters that strip or keep whitespace differently are compared fairly; precision, recall and
F1 are micro-averaged per category and overall. Speed: a long novel from ``../shared/data/texts`` (``--novel`` to pick another file),
split unit by unit (pieces of about 50,000 characters cut at blank lines, as the pipeline feeds
chapters), MB/s in UTF-8 bytes per second of CPU time on one core, plus the number of
sentences found.

Candidates: litseg's own rules (``litseg.segmentation.sentences``); pysbd, syntok, blingfire,
NLTK Punkt (untrained, and trained unsupervised on four novels from ``../shared``; the pretrained
``punkt_tab`` data cannot be downloaded on these offline machines), sentencex; a naive regex as a
floor; and ``X+structure`` variants that run library X inside litseg's structural layer (blank
lines, headings, speaker lines) to separate the two contributions. The libraries are measurement
only (``pip install pysbd syntok blingfire nltk sentencex``); missing ones are skipped.
Library outputs that are strings are mapped back to offsets by their non-whitespace characters;
pieces that cannot be found are counted in the ``lost`` column.

``--write`` puts the tables into the generated blocks ``sentences.literary`` and ``sentences.dialogue`` of
``docs/sentences.md`` (it needs every
library installed and no ``--only``, so that no row goes missing).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable, Iterable

os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from litseg.segmentation import sentences as lit  # noqa: E402
from litseg.utils.docblocks import write_block  # noqa: E402

CASES = REPO / "tests" / "data" / "sentence_cases.jsonl"
DIALOGUE_CASES = REPO / "tests" / "data" / "dialogue_cases.jsonl"
DOC = REPO / "docs" / "sentences.md"
LIBRARIES = ("blingfire", "syntok", "nltk", "sentencex", "pysbd")
SHARED = Path(os.environ.get("LITSEG_SHARED_DIR", REPO.parent / "shared")) / "data"
DEFAULT_NOVEL = SHARED / "texts" / "novel" / "2701_Moby_Dick_or_The_Whale.txt"
PUNKT_TRAINING = ["1342_Pride_and_Prejudice.txt", "158_Emma.txt", "1260_Jane_Eyre.txt",
                  "98_A_Tale_of_Two_Cities.txt"]

Spans = list[tuple[int, int]]
Splitter = Callable[[str], Spans]


# ----------------------------------------------------------------------------- mapping helpers

class Aligner:
    """Map sentence strings back to offsets through their non-whitespace characters."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = [i for i, ch in enumerate(text) if not ch.isspace()]
        self.chars = "".join(text[i] for i in self.pos)
        self.lost = 0

    def spans(self, pieces: Iterable[str]) -> Spans:
        out: Spans = []
        k = 0
        for piece in pieces:
            key = "".join(piece.split())
            if not key:
                continue
            if self.chars.startswith(key, k):
                j = k
            else:  # the library changed something: resynchronise on the piece's opening
                j = self.chars.find(key[:12], k)
                if j < 0:
                    self.lost += 1
                    continue
            e = min(j + len(key), len(self.pos))
            out.append((self.pos[j], self.pos[e - 1] + 1))
            k = e
        return out


def by_strings(fn: Callable[[str], Iterable[str]]) -> Callable[[str], tuple[Spans, int]]:
    def run(text: str) -> tuple[Spans, int]:
        al = Aligner(text)
        return al.spans(fn(text)), al.lost
    return run


def by_spans(fn: Callable[[str], Spans]) -> Callable[[str], tuple[Spans, int]]:
    return lambda text: (fn(text), 0)


_LINE_BREAKS = re.compile(r"[\r\n\v\x85\u2028]")


def with_structure(inner: Callable[[str], tuple[Spans, int]]) -> Callable[[str], tuple[Spans, int]]:
    """Run a splitter inside litseg's blocks and heading lines (offsets shifted back).

    Inside a run the remaining single line breaks are hard wraps, so they are handed to the
    library as spaces (same length, so offsets stay valid); pysbd, for one, otherwise splits at
    every line.
    """
    def run(text: str) -> tuple[Spans, int]:
        out: Spans = []
        lost = 0
        for s, e, atomic in lit.iter_runs(text):
            if atomic:
                out.append((s, e))
                continue
            spans, n_lost = inner(_LINE_BREAKS.sub(" ", text[s:e]))
            lost += n_lost
            out.extend((s + a, s + b) for a, b in spans)
        return out, lost
    return run


# ----------------------------------------------------------------------------- candidates

_NAIVE = re.compile(r"[.!?]+[\"'\u201d\u2019)]*\s+|\n\s*\n")


def naive_regex(text: str) -> Spans:
    out, pos = [], 0
    for m in _NAIVE.finditer(text):
        out.append((pos, m.end()))
        pos = m.end()
    out.append((pos, len(text)))
    return [(s, e) for s, e in (_strip(text, s, e) for s, e in out) if e > s]


def _strip(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


def build_candidates(only: set[str] | None) -> dict[str, Callable[[str], tuple[Spans, int]]]:
    cands: dict[str, Callable[[str], tuple[Spans, int]]] = {}
    cands["litseg (rules)"] = by_spans(lit.split_spans)
    cands["naive regex"] = by_spans(naive_regex)
    try:
        import blingfire

        def bling(text: str) -> Spans:
            if not text.strip():
                return []
            return [_strip(text, a, b) for a, b in blingfire.text_to_sentences_and_offsets(text)[1]]
        cands["blingfire"] = by_spans(bling)
        cands["blingfire+structure"] = with_structure(by_spans(bling))
    except ImportError:
        print("blingfire not installed: skipped", file=sys.stderr)
    try:
        import syntok.segmenter as syntok_seg

        def syn(text: str) -> Spans:
            out = []
            for para in syntok_seg.analyze(text):
                for sent in para:
                    toks = list(sent)
                    if toks:
                        out.append((toks[0].offset, toks[-1].offset + len(toks[-1].value)))
            return out
        cands["syntok"] = by_spans(syn)
        cands["syntok+structure"] = with_structure(by_spans(syn))
    except ImportError:
        print("syntok not installed: skipped", file=sys.stderr)
    try:
        from nltk.tokenize.punkt import PunktSentenceTokenizer, PunktTrainer

        plain = PunktSentenceTokenizer()
        cands["punkt (untrained)"] = by_spans(lambda t: list(plain.span_tokenize(t)))
        if not only or any("punkt (trained" in o for o in only) or "punkt" in (only or ()):
            trainer = PunktTrainer()
            trainer.INCLUDE_ALL_COLLOCS = True
            for name in PUNKT_TRAINING:
                path = SHARED / "texts" / "novel" / name
                if path.exists():
                    trainer.train(path.read_text(encoding="utf-8-sig"), finalize=False)
            trainer.finalize_training()
            trained = PunktSentenceTokenizer(trainer.get_params())
            cands["punkt (trained)"] = by_spans(lambda t: list(trained.span_tokenize(t)))
    except ImportError:
        print("nltk not installed: skipped", file=sys.stderr)
    try:
        import sentencex

        cands["sentencex"] = by_strings(lambda t: sentencex.segment("en", t))
        cands["sentencex+structure"] = with_structure(by_strings(lambda t: sentencex.segment("en", t)))
    except ImportError:
        print("sentencex not installed: skipped", file=sys.stderr)
    try:
        import pysbd

        seg = pysbd.Segmenter(language="en", clean=False)
        cands["pysbd"] = by_strings(seg.segment)
        cands["pysbd+structure"] = with_structure(by_strings(seg.segment))
    except ImportError:
        print("pysbd not installed: skipped", file=sys.stderr)
    if only:
        cands = {k: v for k, v in cands.items() if any(o in k for o in only)}
    return cands


# ----------------------------------------------------------------------------- scoring

def boundaries(text: str, spans: Spans) -> set[int]:
    """Sentence starts as indices into the non-whitespace characters (the first one excluded)."""
    nonws_before = [0] * (len(text) + 1)
    n = 0
    for i, ch in enumerate(text):
        nonws_before[i] = n
        if not ch.isspace():
            n += 1
    nonws_before[len(text)] = n
    starts = {nonws_before[s] for s, e in spans if e > s}
    starts.discard(0)
    starts.discard(n)
    return starts


def gold_spans(case: dict) -> Spans:
    out, pos = [], 0
    for sent in case["sentences"]:
        i = case["text"].index(sent, pos)
        out.append((i, i + len(sent)))
        pos = i + len(sent)
    return out


def load_cases(path: Path = CASES) -> list[dict]:
    """The labelled cases, book excerpts read from the shared texts (tests/sentence_cases.py)."""
    sys.path.insert(0, str(REPO))
    from tests.sentence_cases import load_cases as load

    shared = Path(os.environ.get("LITSEG_SHARED_DIR", REPO.parent / "shared")) / "data"
    return load(path, shared if shared.is_dir() else None)


def evaluate(split: Callable[[str], tuple[Spans, int]], cases: list[dict]) -> dict:
    tp: dict[str, int] = defaultdict(int)
    fp: dict[str, int] = defaultdict(int)
    fn: dict[str, int] = defaultdict(int)
    lost = 0
    errors: list[tuple[str, list[int], list[int]]] = []
    for case in cases:
        text = case["text"]
        gold = boundaries(text, gold_spans(case))
        spans, n_lost = split(text)
        lost += n_lost
        pred = boundaries(text, spans)
        for key in (case["category"], "overall", "split:" + case.get("split", "dev")):
            tp[key] += len(gold & pred)
            fp[key] += len(pred - gold)
            fn[key] += len(gold - pred)
        if gold != pred:
            errors.append((case["id"], sorted(pred - gold), sorted(gold - pred)))
    scores = {}
    for key in tp.keys() | fn.keys():
        p = tp[key] / (tp[key] + fp[key]) if tp[key] + fp[key] else 1.0
        r = tp[key] / (tp[key] + fn[key]) if tp[key] + fn[key] else 1.0
        scores[key] = (p, r, 2 * p * r / (p + r) if p + r else 0.0)
    return {"scores": scores, "lost": lost, "errors": errors}


def novel_units(path: Path, size: int = 50_000) -> list[str]:
    text = path.read_bytes().decode("utf-8-sig")
    units, pos = [], 0
    while pos < len(text):
        cut = text.find("\n\n", pos + size) if pos + size < len(text) else -1
        cut = len(text) if cut < 0 else cut + 2
        if "\r\n" in text[pos:pos + 2 * size]:
            crlf = text.find("\r\n\r\n", pos + size)
            cut = len(text) if crlf < 0 or pos + size >= len(text) else crlf + 4
        units.append(text[pos:cut])
        pos = cut
    return units


def speed(split: Callable[[str], tuple[Spans, int]], units: list[str]) -> tuple[float, int]:
    """MB/s of this process's CPU time (steadier than wall time on a shared machine)."""
    n_bytes = sum(len(u.encode("utf-8")) for u in units)
    t0 = time.process_time()
    n = sum(len(split(u)[0]) for u in units)
    return n_bytes / 1e6 / (time.process_time() - t0), n


# ----------------------------------------------------------------------------- report

def markdown_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def plain_table(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    return "\n".join("  ".join(str(x).rjust(w) if i else str(x).ljust(w)
                               for i, (x, w) in enumerate(zip(row, widths))) for row in [head, *rows])


def _f1(scores: dict, key: str) -> str:
    return f"{scores[key][2]:.3f}" if key in scores else "n/a"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=Path, default=CASES)
    ap.add_argument("--dialogue-cases", type=Path, default=DIALOGUE_CASES)
    ap.add_argument("--novel", type=Path, default=DEFAULT_NOVEL)
    ap.add_argument("--only", help="comma-separated name fragments of the candidates to run")
    ap.add_argument("--no-speed", action="store_true", help="skip the speed measurement")
    ap.add_argument("--errors", action="store_true", help="list wrong boundaries per case")
    ap.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    ap.add_argument("--write", action="store_true", help=f"write the tables into {DOC.relative_to(REPO)}")
    args = ap.parse_args(argv)

    if args.write:
        missing = []
        for lib in LIBRARIES:
            try:
                importlib.import_module(lib)
            except ImportError:
                missing.append(lib)
        if args.only or missing or args.no_speed:
            raise SystemExit("--write needs every candidate and the speed run: no --only / --no-speed, "
                             f"and the libraries installed (missing: {', '.join(missing) or 'none'})")
    cases = load_cases(args.cases)
    dialogue = load_cases(args.dialogue_cases) if args.dialogue_cases.exists() else []
    cats = sorted({c["category"] for c in cases})
    dcats = sorted({c["category"] for c in dialogue})
    n_gold = sum(len(c["sentences"]) for c in cases)
    n_held = sum(c.get("split") == "heldout" for c in cases)
    n_dgold = sum(len(c["sentences"]) for c in dialogue)
    n_dheld = sum(c.get("split") == "heldout" for c in dialogue)
    intro = (f"literary set: {len(cases)} cases ({n_held} held out), {n_gold} sentences; dialogue set: "
             f"{len(dialogue)} cases ({n_dheld} held out), {n_dgold} sentences")
    print(intro)
    only = {o.strip() for o in args.only.split(",")} if args.only else None
    cands = build_candidates(only)
    units = None
    speed_note = "speed not measured"
    if not args.no_speed:
        if args.novel.exists():
            units = novel_units(args.novel)
            speed_note = (f"speed on {args.novel.name}: {sum(map(len, units)):,} characters in "
                          f"{len(units)} units")
        else:
            speed_note = f"speed skipped: {args.novel} not found (needs ../shared)"
        print(speed_note)

    rows = []
    for name, split in cands.items():
        res = evaluate(split, cases)
        dres = evaluate(split, dialogue) if dialogue else {"scores": {}, "errors": [], "lost": 0}
        mbs, n_sent = speed(split, units) if units else (float("nan"), 0)
        rows.append((name, res, dres, mbs, n_sent))
        if args.errors:
            for cid, extra, missed in res["errors"] + dres["errors"]:
                print(f"  {name} | {cid}: extra {extra} missed {missed}")
    rows.sort(key=lambda r: -r[1]["scores"]["overall"][2])

    head = ["splitter", *[c[:8] for c in cats], "P", "R", "F1", "F1 dev", "F1 held", "F1 dialogue",
            "lost", "MB/s", "sents"]
    table = []
    for name, res, dres, mbs, n_sent in rows:
        sc = res["scores"]
        table.append([name, *[f"{sc[c][2]:.2f}" for c in cats], f"{sc['overall'][0]:.3f}",
                      f"{sc['overall'][1]:.3f}", f"{sc['overall'][2]:.3f}", _f1(sc, "split:dev"),
                      _f1(sc, "split:heldout"), _f1(dres["scores"], "overall"),
                      str(res["lost"] + dres["lost"]), f"{mbs:.2f}", f"{n_sent:,}"])
    dhead = ["splitter", *dcats, "P", "R", "F1", "F1 dev", "F1 held"]
    dtable = []
    for name, _res, dres, _mbs, _n in sorted(rows, key=lambda r: -r[2]["scores"].get("overall", (0, 0, 0))[2]):
        sc = dres["scores"]
        if "overall" not in sc:
            continue
        dtable.append([name, *[f"{sc[c][2]:.2f}" for c in dcats], f"{sc['overall'][0]:.3f}",
                       f"{sc['overall'][1]:.3f}", f"{sc['overall'][2]:.3f}", _f1(sc, "split:dev"),
                       _f1(sc, "split:heldout")])
    render = markdown_table if (args.markdown or args.write) else plain_table
    literary_md = render(head, table)
    dialogue_md = render(dhead, dtable)
    print(literary_md)
    print()
    print(dialogue_md)
    print("category columns: boundary F1 per category; P/R/F1 overall (micro); F1 dev / held: "
          "the cases the rules were written against / cases labelled before the rules ever saw "
          "them; F1 dialogue: the dialogue set; lost: library pieces that could not be mapped "
          "back; sents: sentences found in the novel")
    if args.write:
        note = (f"_{intro}. {speed_note}; MB/s of CPU time on one core, measured with "
                f"`benchmarks/sentences.py --write`._")
        write_block(DOC, "sentences.literary", "benchmarks/sentences.py --write", note + "\n\n" + literary_md)
        write_block(DOC, "sentences.dialogue", "benchmarks/sentences.py --write", dialogue_md)
        print(f"wrote the tables into {DOC}")


if __name__ == "__main__":
    main()
