"""Pairwise human evaluation of answers, as the paper ran it: one system's answer (LitSeg-Lite's by
default) against each comparison method's answer to the same question, judged against the source.

Export (:func:`export_pairwise_sheet`, or ``python -m litseg.rag.human_pairwise export``) reads
an ``evaluate.py`` run folder whose chunkers answered with generation on, and writes:

* ``pairwise_sheet.csv`` and ``pairwise_sheet.html``: per item the question, the reference
  answers (shown as a help that may be wrong), the source to judge against and the two answers
  as "Answer 1" and "Answer 2" in random order, with nothing that names a method; empty
  ``rater``, ``judgement`` (``1``, ``2`` or ``tie``) and ``comment`` columns. The source is the
  book text within ``window`` characters (500 by default) on each side of every gold evidence
  span, merged where they meet; a question without gold evidence points to the whole book,
  written to ``books/<book_id>.txt`` beside the sheet;
* ``key.csv`` (keep it from the raters): item -> comparison, system, other method, question id,
  and on which side the system's answer was shown;
* ``instructions.md``: the guide (factual accuracy against the source first; informativeness
  decides between two accurate answers).

Import (:func:`read_pairwise`) turns the filled sheets (one per rater, or one with a rater
column) into win/loss/tie of the system, using the key. Analysis (:func:`pairwise_summary`):
per comparison the paper's win rate (per item, the share of raters who preferred the system,
averaged over items), the loss and tie rates measured the same way, the win rate with ties as
half, a bootstrap interval over items, and agreement between raters (pairwise Cohen's kappa with
raw agreement, Fleiss' kappa), also pooled over all comparisons. The rating sheets for chunks and
their analysis are in :mod:`litseg.rag.human_eval`.
"""

from __future__ import annotations

import argparse
import csv
import html
import json
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litseg.rag.rows import count_of, text_of
from litseg.rag.human_eval import SHEET_SCRIPT, read_key
from litseg.rag.agreement import cohen_kappas, fleiss_kappa
from litseg.rag.evaluation.run import load_suite
from litseg.rag.report import safe_name
from litseg.rag.stats import bootstrap_ci

JUDGEMENTS = ("1", "2", "tie")
_SIDE_ALIASES = {"1": "1", "a": "1", "first": "1", "answer 1": "1", "2": "2", "b": "2", "second": "2",
                 "answer 2": "2", "tie": "tie", "t": "tie", "equal": "tie", "same": "tie", "0": "tie",
                 "draw": "tie"}
GAP = "\n[...]\n"

GUIDE = """\
# Comparing two answers

Each item shows a question about a book, a stretch of the book's text (the source), the answers
that annotators of the benchmark wrote, and two answers produced by two different systems,
labelled Answer 1 and Answer 2 in random order. Nothing tells which system wrote which answer.
Work alone, without discussing items with other raters.

Decide which answer is better, or whether they are equally good, using the source as the only
evidence. The annotators' answers are a help, not the truth: they can be incomplete or wrong.

## First: is the answer factually right?

An answer fails this check when it

- states events, actions or details that the source does not support, or speculates beyond it;
- takes what a character says at face value where the source shows it is a pretence, a lie or
  politeness, and so gets the story's logic wrong;
- accepts a false or muddled premise in the question instead of setting it straight from the text.

An answer that passes beats an answer that fails, however much more the failing one says.

## Then: which one tells the reader more?

When both pass (or both fail), prefer the answer that

- gathers all the facts the question calls for when several things happen at once or several
  reasons combine, rather than one isolated fact;
- follows an action through to its outcome rather than stopping partway;
- is more precise: a name instead of a description, the specific detail instead of a vague one.

Length alone is not informativeness. Choose `tie` when neither answer is better on either count.

## Filling in the sheet

In `pairwise_sheet.csv` (or `pairwise_sheet.html`, which saves your progress in the browser and
downloads the filled sheet), put your name or initials in `rater`, and for every item `1`, `2`
or `tie` in `judgement`. Use `comment` for anything worth telling the organisers.
"""


@dataclass(slots=True)
class PairwiseExport:
    sheet_csv: Path
    sheet_html: Path
    key_csv: Path
    instructions: Path
    n_items: int
    per_comparison: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def merge_spans(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def source_window(text: str, spans: Sequence[tuple[int, int]], window: int = 500) -> str:
    """The book text within ``window`` characters on each side of every gold span, spans that
    meet merged, pieces joined by a ``[...]`` line."""
    if window < 0:
        raise ValueError(f"window must be >= 0, got {window}")
    pieces = merge_spans((max(0, s - window), min(len(text), e + window)) for s, e in spans)
    return GAP.join(text[s:e].strip() for s, e in pieces)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_run_answers(run_dir: str | Path) -> dict[str, dict[str, dict[str, Any]]]:
    """``label -> qid -> row`` of the answered questions in an ``evaluate.py`` run folder
    (``per_question/<label>.jsonl``; labels as the run wrote them, from ``results.json``)."""
    run = Path(run_dir)
    files = {p.stem: p for p in sorted((run / "per_question").glob("*.jsonl"))}
    if not files:
        raise FileNotFoundError(f"{run}: no per_question/*.jsonl (not an evaluate.py run folder?)")
    labels: dict[str, str] = {}
    results = run / "results.json"
    if results.is_file():
        for r in json.loads(results.read_text(encoding="utf-8")).get("results", []):
            labels[safe_name(str(r.get("label")))] = str(r.get("label"))
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for stem, path in files.items():
        rows = {str(r["qid"]): r for r in _read_jsonl(path) if "answer" in r}
        out[labels.get(stem, stem)] = rows
    return out


def _draw_pairs(answers: Mapping[str, Mapping[str, Mapping[str, Any]]], system: str, others: Sequence[str],
                questions: Mapping[str, Any], n_per_comparison: int, rng: random.Random, notes: list[str]
                ) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """``(other, qid)`` pairs, up to ``n_per_comparison`` per comparison among the questions both
    sides answered, shuffled; shortfalls are added to ``notes``."""
    drawn: list[tuple[str, str]] = []
    per_comparison: dict[str, int] = {}
    for other in others:
        common = sorted(q for q in set(answers[system]) & set(answers[other])
                        if _usable(answers[system][q]) and _usable(answers[other][q]) and q in questions)
        if not common:
            notes.append(f"{system} vs {other}: no question answered by both")
            continue
        picked = rng.sample(common, min(n_per_comparison, len(common)))
        if len(picked) < n_per_comparison:
            notes.append(f"{system} vs {other}: only {len(picked)} question(s) answered by both, all taken")
        per_comparison[f"{system} vs {other}"] = len(picked)
        drawn.extend((other, q) for q in picked)
    if not drawn:
        raise ValueError(f"nothing to compare: {'; '.join(notes)}")
    rng.shuffle(drawn)
    return drawn, per_comparison


def export_pairwise_sheet(answers: Mapping[str, Mapping[str, Mapping[str, Any]]], bench: Any, out_dir: str | Path,
                          *, system: str, others: Sequence[str] | None = None, n_per_comparison: int = 100,
                          window: int = 500, seed: int = 0, title: str = "Answer comparison") -> PairwiseExport:
    """Write a blind pairwise sheet (see the module docstring). ``answers`` is ``label -> qid ->
    per-question row`` (:func:`load_run_answers`); ``bench`` the run's benchmark (question texts,
    gold evidence and book texts). Questions where either side has no answer (a failed request)
    are left out; each comparison draws up to ``n_per_comparison`` of the rest, seeded."""
    if system not in answers:
        raise ValueError(f"no answers of {system!r}; the run has {sorted(answers)}")
    others = [o for o in (others if others is not None else sorted(answers)) if o != system]
    if not others:
        raise ValueError("no comparison method: the run needs answers of at least two chunkers")
    missing = [o for o in others if o not in answers]
    if missing:
        raise ValueError(f"no answers of {missing}; the run has {sorted(answers)}")
    if n_per_comparison < 1:
        raise ValueError("n_per_comparison must be >= 1")
    questions = {q.qid: q for q in bench.questions}
    books = {b.book_id: b for b in bench.books}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"litseg-pairwise-{seed}")
    notes: list[str] = []
    drawn, per_comparison = _draw_pairs(answers, system, others, questions, n_per_comparison, rng, notes)
    width = max(4, len(str(len(drawn))))
    texts: dict[str, str] = {}
    items: list[dict[str, str]] = []
    key_rows: list[dict[str, str]] = []
    whole_books: set[str] = set()
    for k, (other, qid) in enumerate(drawn, 1):
        q = questions[qid]
        book = books.get(q.book_id)
        if q.book_id not in texts and book is not None and book.has_text:
            texts[q.book_id] = book.load_text()
        spans = q.gold_spans
        if spans and q.book_id in texts:
            source = source_window(texts[q.book_id], spans, window)
        else:
            whole_books.add(q.book_id)
            source = f"(no gold evidence: judge against the whole book, books/{q.book_id}.txt)"
        system_first = rng.random() < 0.5
        a_sys, a_oth = answers[system][qid]["answer"], answers[other][qid]["answer"]
        first, second = (a_sys, a_oth) if system_first else (a_oth, a_sys)
        item_id = f"Q{k:0{width}d}"
        items.append({"item_id": item_id, "book": (book.title if book is not None and book.title else q.book_id),
                      "question": q.question, "reference_answers": " | ".join(q.answers), "source": source,
                      "answer_1": str(first), "answer_2": str(second), "rater": "", "judgement": "", "comment": ""})
        key_rows.append({"item_id": item_id, "comparison": f"{system} vs {other}", "system": system, "other": other,
                         "qid": qid, "book_id": q.book_id, "system_side": "1" if system_first else "2"})
    for bid in sorted(whole_books):
        if bid in texts:
            (out / "books").mkdir(exist_ok=True)
            (out / "books" / f"{bid}.txt").write_text(texts[bid], encoding="utf-8")
        else:
            notes.append(f"book {bid}: no text to hand to the raters")
    sheet_csv = out / "pairwise_sheet.csv"
    _write_csv(sheet_csv, items)
    key_csv = out / "key.csv"
    _write_csv(key_csv, key_rows)
    instructions = out / "instructions.md"
    instructions.write_text(GUIDE, encoding="utf-8")
    sheet_html = out / "pairwise_sheet.html"
    sheet_html.write_text(render_pairwise_html(items, title=title, sheet_id=f"{title}-{seed}-{len(items)}"),
                          encoding="utf-8")
    return PairwiseExport(sheet_csv=sheet_csv, sheet_html=sheet_html, key_csv=key_csv, instructions=instructions,
                          n_items=len(items), per_comparison=per_comparison, notes=notes)


def _usable(row: Mapping[str, Any]) -> bool:
    return row.get("answer_error") is None and bool(str(row.get("answer") or "").strip())


def _write_csv(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def render_pairwise_html(items: Sequence[Mapping[str, str]], *, title: str = "Answer comparison",
                         sheet_id: str = "sheet") -> str:
    """One self-contained page (nothing fetched): the guide, one card per item with the source
    and both answers, a 1 / 2 / tie choice and a comment; progress kept in the browser; a button
    that downloads ``item_id, rater, judgement, comment`` as CSV."""
    e = html.escape
    guide = "".join(f"<p>{e(p)}</p>" for p in GUIDE.split("\n\n")[1:3])
    cards = []
    for it in items:
        iid = e(it["item_id"])
        choices = "".join(f'<label><input type="radio" name="{iid}|judgement" value="{v}">'
                          f'{"Answer " + v if v != "tie" else "tie"}</label>' for v in JUDGEMENTS)
        cards.append(
            f'<section class="item" id="{iid}"><h2>{iid} <small>{e(it["book"])}</small></h2>'
            f'<p class="q">{e(it["question"])}</p><p class="ref">Annotators\' answers (may be wrong): '
            f'{e(it["reference_answers"])}</p><div class="src">{e(it["source"])}</div>'
            f'<div class="ans"><b>Answer 1</b><p>{e(it["answer_1"])}</p></div>'
            f'<div class="ans"><b>Answer 2</b><p>{e(it["answer_2"])}</p></div>'
            f'<div class="pick">{choices}</div>'
            f'<textarea name="{iid}|comment" placeholder="comment (optional)"></textarea></section>')
    ids = json.dumps([it["item_id"] for it in items])
    store = json.dumps(f"pairwise-sheet:{sheet_id}")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>
<style>
body{{font-family:Georgia,serif;max-width:56em;margin:2em auto;padding:0 1em;color:#222}}
.item{{border:1px solid #ccc;border-radius:6px;padding:1em;margin:1.5em 0}}
.q{{font-weight:bold}} .ref{{color:#666;font-size:.9em}}
.src{{white-space:pre-wrap;line-height:1.45;border-left:3px solid #468;padding-left:.8em;max-height:28em;overflow:auto}}
.ans{{display:inline-block;vertical-align:top;width:46%;margin:.6em 2% 0 0}}
.pick{{font-family:sans-serif;margin:.5em 0}} .pick label{{margin-right:1.5em}} textarea{{width:100%}}
#bar{{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #ddd;font-family:sans-serif}}
</style></head><body>
<h1>{e(title)}</h1>{guide}<p>The full guide is in instructions.md.</p>
<div id="bar">Rater: <input id="rater" size="12"> <button id="dl">Download judgements (CSV)</button>
<span id="progress"></span></div>
{"".join(cards)}
<script>
const IDS={ids}, KEY={store};
function pick(id){{const c=document.querySelector(`input[name="${{id}}|judgement"]:checked`);return c?c.value:""}}
function done(id){{return pick(id)!==""}}
function row(id,r){{return [id,r,pick(id),document.querySelector(`textarea[name="${{id}}|comment"]`).value]}}
const HEADER=["item_id","rater","judgement","comment"], FILE="judgements", DONE="items judged";
{SHEET_SCRIPT}</script></body></html>
"""


# ------------------------------------------------------------------------------------- import
def read_pairwise(sources: Iterable[str | Path], key: Mapping[str, Mapping[str, str]] | str | Path):
    """Filled pairwise sheets joined with the key: a DataFrame ``item_id, rater, comparison,
    system, other, qid, judgement`` with judgement ``win``/``loss``/``tie`` for the system. The
    rater is the ``rater`` column, else the file name. Blank judgements are skipped (counted in
    ``df.attrs["blank"]``); an unknown item, a judgement other than 1/2/tie or a rater judging
    an item twice is an error."""
    import pandas as pd

    key_map = read_key(key) if isinstance(key, (str, Path)) else key
    records: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    blank = 0
    for src in sources:
        path = Path(src)
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            if reader.fieldnames is None:
                raise ValueError(f"{path}: empty file")
            cols = {_canon(c): c for c in reader.fieldnames if c is not None}
            if not {"item_id", "judgement"} <= set(cols):
                raise ValueError(f"{path}: needs item_id and judgement columns (found {sorted(cols)})")
            for n, raw in enumerate(reader, 2):
                row = {k: (raw.get(c) or "").strip() for k, c in cols.items()}
                iid = row["item_id"]
                if not iid:
                    continue
                k = key_map.get(iid)
                if k is None:
                    raise ValueError(f"{path}:{n}: item {iid!r} is not in the key")
                j = row["judgement"].lower()
                if j == "":
                    blank += 1
                    continue
                side = _SIDE_ALIASES.get(j)
                if side is None:
                    raise ValueError(f"{path}:{n}: judgement {row['judgement']!r} is not 1, 2 or tie")
                rater = row.get("rater") or path.stem
                if (rater, iid) in seen:
                    raise ValueError(f"{path}:{n}: rater {rater!r} judged item {iid} twice")
                seen.add((rater, iid))
                outcome = "tie" if side == "tie" else ("win" if side == str(k.get("system_side")) else "loss")
                records.append({"item_id": iid, "rater": rater, "comparison": text_of(k, "comparison"),
                                "system": text_of(k, "system"), "other": text_of(k, "other"),
                                "qid": text_of(k, "qid"), "judgement": outcome})
    df = pd.DataFrame.from_records(records, columns=["item_id", "rater", "comparison", "system", "other", "qid",
                                                     "judgement"])
    df.attrs["blank"] = blank
    return df


def _canon(header: str) -> str:
    h = "_".join(str(header).strip().lower().replace("-", " ").split())
    return {"item": "item_id", "id": "item_id", "judgment": "judgement", "preference": "judgement",
            "choice": "judgement", "annotator": "rater"}.get(h, h)


# ------------------------------------------------------------------------------------ analysis
def _rates(df: Any, *, n_resamples: int, seed: int) -> dict[str, Any]:
    per_item: dict[str, list[str]] = defaultdict(list)
    for iid, j in zip(df["item_id"], df["judgement"]):
        per_item[str(iid)].append(str(j))
    items = sorted(per_item)
    win = [per_item[i].count("win") / len(per_item[i]) for i in items]
    loss = [per_item[i].count("loss") / len(per_item[i]) for i in items]
    half = [(per_item[i].count("win") + 0.5 * per_item[i].count("tie")) / len(per_item[i]) for i in items]
    n = len(items)
    ci = bootstrap_ci(win, None, n_resamples=n_resamples, seed=seed) if n >= 2 else None
    labels: dict[str, dict[str, str]] = defaultdict(dict)
    for rater, iid, j in zip(df["rater"], df["item_id"], df["judgement"]):
        labels[str(rater)][str(iid)] = str(j)
    return {
        "win_rate": sum(win) / n, "loss_rate": sum(loss) / n, "tie_rate": 1.0 - (sum(win) + sum(loss)) / n,
        "win_rate_ci95": [ci.low, ci.high] if ci is not None else None,
        "win_rate_ties_half": sum(half) / n,
        "n_items": n, "n_judgements": int(len(df)), "n_raters": int(df["rater"].nunique()),
        "cohen_kappa": cohen_kappas(labels, categories=["win", "loss", "tie"]),
        "fleiss_kappa": fleiss_kappa(labels),
    }


def pairwise_summary(df: Any, *, n_resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Per comparison and pooled (``"all"``): win/loss/tie rates as the paper computes them
    (per item, the share of raters choosing each outcome, averaged over items), the win rate
    with ties as half, a 95% bootstrap interval of the win rate over items, and agreement
    (pairwise Cohen's kappa and raw agreement, Fleiss' kappa over the items every rater judged)."""
    if len(df) == 0:
        raise ValueError("no judgements")
    out: dict[str, Any] = {"comparisons": {}, "blank_judgements": int(count_of(df.attrs, "blank"))}
    for comp, g in df.groupby("comparison"):
        out["comparisons"][str(comp)] = _rates(g, n_resamples=n_resamples, seed=seed)
    out["all"] = _rates(df, n_resamples=n_resamples, seed=seed)
    return out


def summary_markdown(summary: Mapping[str, Any]) -> str:
    """The win/tie/loss table with agreement, one row per comparison and one pooled."""
    def pct(x: Any) -> str:
        return "–" if x is None else f"{100 * float(x):.1f}%"

    def kappa(x: Mapping[str, Any]) -> str:
        k = (x.get("fleiss_kappa") or {}).get("kappa")
        return "–" if k is None else f"{k:.3f}"

    def agreement(x: Mapping[str, Any]) -> str:
        pairs = [v["agreement"] for v in (x.get("cohen_kappa") or {}).values() if v.get("agreement") is not None]
        return "–" if not pairs else pct(sum(pairs) / len(pairs))

    head = ["comparison", "items", "raters", "win [95% CI]", "tie", "loss", "win (ties as half)",
            "Fleiss' kappa", "raw agreement (mean over rater pairs)"]
    rows = []
    for name, x in [*summary["comparisons"].items(), ("all comparisons", summary["all"])]:
        ci = x.get("win_rate_ci95")
        win = pct(x["win_rate"]) + (f" [{pct(ci[0])}, {pct(ci[1])}]" if ci and ci[0] == ci[0] else "")
        rows.append([name, str(x["n_items"]), str(x["n_raters"]), win, pct(x["tie_rate"]), pct(x["loss_rate"]),
                     pct(x["win_rate_ties_half"]), kappa(x), agreement(x)])
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------- CLI
def _benchmark_of_run(run_dir: Path) -> Any:
    from omegaconf import OmegaConf

    cfg_file = run_dir / "config.yaml"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{run_dir}: no config.yaml to find the run's benchmark")
    cfg = OmegaConf.to_container(OmegaConf.load(cfg_file), resolve=True)
    return load_suite(cfg["suite"])  # type: ignore[index]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m litseg.rag.human_pairwise",
                                description="Pairwise answer sheets: export from an evaluate.py run, analyse filled sheets.")
    sub = p.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export", help="write a blind pairwise sheet from an evaluate.py run with generation on")
    ex.add_argument("run_dir", type=Path)
    ex.add_argument("--system", default="litseg_lite", help="the method whose answers are compared with the others")
    ex.add_argument("--others", nargs="*", default=None, help="comparison methods (default: every other chunker)")
    ex.add_argument("--n", type=int, default=100, help="items per comparison")
    ex.add_argument("--window", type=int, default=500, help="characters of source on each side of the gold evidence")
    ex.add_argument("--seed", type=int, default=0)
    ex.add_argument("--out", type=Path, required=True)
    an = sub.add_parser("analyze", help="win/tie/loss and agreement from filled sheets")
    an.add_argument("sheets", nargs="+", type=Path)
    an.add_argument("--key", type=Path, required=True)
    an.add_argument("--out", type=Path, default=None, help="write the summary as JSON here")
    args = p.parse_args(argv)
    if args.cmd == "export":
        res = export_pairwise_sheet(load_run_answers(args.run_dir), _benchmark_of_run(args.run_dir), args.out,
                                    system=args.system, others=args.others, n_per_comparison=args.n,
                                    window=args.window, seed=args.seed)
        print(f"wrote {res.n_items} items ({res.per_comparison}) to {args.out}; keep {res.key_csv.name} from the raters")
        for note in res.notes:
            print(f"note: {note}")
        return 0
    summary = pairwise_summary(read_pairwise(args.sheets, args.key))
    print(summary_markdown(summary))
    if args.out is not None:
        args.out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
