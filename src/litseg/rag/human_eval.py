"""Human evaluation: blind rating sheets for chunks, and the analysis of the filled sheets.

Chunk ratings: :func:`export_rating_sample` draws a sample of chunks per chunker, stratified by
book, shuffles them together and hides the chunker behind opaque item ids. Raters get a CSV and a
self-contained HTML sheet (no network needed) and score each chunk 1-5 on Content Completeness,
Topical Coherence and Boundary Placement; the key that maps item ids back to chunkers is written
to a separate file for the organiser. :func:`read_ratings` joins filled sheets (any number of
raters) with the key and :func:`summarize_ratings` reports per-chunker means, Overall (mean of
the three dimensions), ICC(2,1) (pingouin), pairwise Cohen's kappa (scikit-learn) and Fleiss'
kappa (statsmodels).

Answer preferences: :func:`read_preferences` and :func:`win_rates` score Win/Loss/Tie judgements
of one system's answers against another's, ties counting half. The paper's pairwise protocol, with
its answer sheet (source window around the gold evidence), import and win/tie/loss analysis, is
:mod:`litseg.rag.human_pairwise`.

pandas, pingouin, scikit-learn and statsmodels are imported inside the functions.
"""

from __future__ import annotations

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
from litseg.rag.agreement import labels_by_rater, cohen_kappas, fleiss_kappa, icc2_1

DIMENSIONS: tuple[str, ...] = ("content_completeness", "topical_coherence", "boundary_placement")
DIMENSION_TITLES: dict[str, str] = {
    "content_completeness": "Content Completeness",
    "topical_coherence": "Topical Coherence",
    "boundary_placement": "Boundary Placement",
}
# Rater guidance, written for this project.
DIMENSION_GUIDE: dict[str, str] = {
    "content_completeness": (
        "Could someone who reads only this passage follow what happens in it? Give a high score "
        "when it tells a whole episode, scene or exchange, with its start and its outcome. Give a "
        "low score when it opens or stops partway through an action, so the reader holds a piece "
        "of something larger and needs the surrounding pages to make sense of it."),
    "topical_coherence": (
        "Does the passage hold together around one matter? Give a high score when everything in "
        "it serves one episode, conversation or line of thought. Give a low score when it runs two "
        "or more unconnected events, places or subjects together."),
    "boundary_placement": (
        "Look at where the passage begins and where it ends; the grey text, where shown, is what "
        "comes just before and just after it in the book. Give a high score when both edges sit at "
        "a natural seam: a change of scene, time, place, speaker or subject. Give a low score when "
        "an edge splits a sentence, a speech, or an exchange that plainly carries on across it."),
}
SCALE_GUIDE: dict[int, str] = {5: "fully", 4: "largely", 3: "in part", 2: "barely", 1: "not at all"}
GENERAL_GUIDE = (
    "Each passage was cut from a novel, story or play by one of several automatic segmentation "
    "methods. The passages are listed in random order and nothing shows which method produced "
    "which. Judge every passage on its own, without comparing it with the others, and score each "
    "of the three questions from 1 (not at all) to 5 (fully). Work alone; please do not discuss "
    "passages with other raters. If you are unsure, give your best score and say why in the "
    "comment field.")

_ALIASES: dict[str, str] = {
    "content_completeness": "content_completeness", "completeness": "content_completeness",
    "comp": "content_completeness", "topical_coherence": "topical_coherence",
    "coherence": "topical_coherence", "coh": "topical_coherence",
    "boundary_placement": "boundary_placement", "boundary": "boundary_placement",
    "bnd": "boundary_placement", "item_id": "item_id", "item": "item_id", "id": "item_id",
    "rater": "rater", "annotator": "rater", "comment": "comment", "comments": "comment",
    "judgement": "judgement", "judgment": "judgement", "preference": "judgement",
    "result": "judgement", "label": "judgement", "comparison": "comparison",
}


def _canon(header: str) -> str:
    key = "_".join(str(header).strip().lower().replace("-", " ").split())
    return _ALIASES.get(key, key)


def _field(chunk: Any, name: str, default: Any = None) -> Any:
    if isinstance(chunk, Mapping):
        return chunk.get(name, default)
    return getattr(chunk, name, default)


# ------------------------------------------------------------------------------------- sampling
def stratified_sample(chunks: Sequence[Any], n: int, rng: random.Random) -> list[Any]:
    """``n`` chunks spread as evenly as possible over books: each book gets n // books, the
    remainder goes to randomly chosen books, and the quota a small book cannot fill passes to
    books with chunks to spare. All chunks when there are no more than ``n``."""
    by_book: dict[str, list[Any]] = defaultdict(list)
    for c in chunks:
        by_book[str(_field(c, "book_id", ""))].append(c)
    if len(chunks) <= n:
        picked = list(chunks)
        rng.shuffle(picked)
        return picked
    books = sorted(by_book)
    rng.shuffle(books)
    quota = {b: 0 for b in books}
    left = n
    while left > 0:
        open_books = [b for b in books if quota[b] < len(by_book[b])]
        share, extra = divmod(left, len(open_books))
        for i, b in enumerate(open_books):
            give = min(share + (1 if i < extra else 0), len(by_book[b]) - quota[b])
            quota[b] += give
            left -= give
    picked = []
    for b in books:
        picked.extend(rng.sample(by_book[b], quota[b]))
    return picked


@dataclass(slots=True)
class RatingExport:
    sheet_csv: Path
    sheet_html: Path
    key_csv: Path
    instructions: Path
    n_items: int
    per_chunker: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def export_rating_sample(chunks_by_chunker: Mapping[str, Sequence[Any]], out_dir: str | Path, *,
                         n_per_chunker: int = 100, seed: int = 0,
                         texts: Mapping[str, str] | None = None, neighbour_chars: int = 300,
                         text_key: str = "main_text", show_subtitle: bool = False,
                         title: str = "Passage rating") -> RatingExport:
    """Write a blind rating sample to ``out_dir``:

    * ``rating_sheet.csv`` and ``rating_sheet.html``: items in random order with opaque ids
      (``P0001``...), book, unit, passage text and, when ``texts`` (book_id -> book text) is given
      and chunks carry ``start``/``end`` (or ``main_spans``), ``neighbour_chars`` of the text
      before and after; empty ``rater``, score and comment columns for the raters. The HTML sheet saves progress in the browser and downloads
      the filled ratings as CSV.
    * ``key.csv``: item id -> chunker, book, unit, chunk id. Keep it away from the raters.
    * ``instructions.md``: the rater guide.

    The passage shown is ``text_key`` (``main_text``: the chunk's own text without the generated
    subtitle, which only some chunkers produce and would give them away); ``show_subtitle`` adds
    the subtitle anyway.
    """
    if not chunks_by_chunker:
        raise ValueError("no chunkers given")
    if n_per_chunker < 1:
        raise ValueError("n_per_chunker must be >= 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"litseg-rating-{seed}")
    notes: list[str] = []
    drawn: list[tuple[str, Any]] = []
    per_chunker: dict[str, int] = {}
    for name in sorted(chunks_by_chunker):
        chunks = [c for c in chunks_by_chunker[name] if _passage(c, text_key).strip()]
        if not chunks:
            raise ValueError(f"chunker {name!r} has no chunks with text")
        sample = stratified_sample(chunks, n_per_chunker, rng)
        if len(sample) < n_per_chunker:
            notes.append(f"{name}: only {len(sample)} chunk(s) available, all taken")
        per_chunker[name] = len(sample)
        drawn.extend((name, c) for c in sample)
    rng.shuffle(drawn)
    width = max(4, len(str(len(drawn))))
    items: list[dict[str, str]] = []
    key_rows: list[dict[str, str]] = []
    for k, (name, c) in enumerate(drawn, 1):
        item_id = f"P{k:0{width}d}"
        book = str(_field(c, "book_id", ""))
        unit = str(_field(c, "unit_title", "") or _field(c, "unit_id", ""))
        passage = _passage(c, text_key)
        if show_subtitle and _field(c, "subtitle"):
            passage = f"[{_field(c, 'subtitle')}]\n{passage}"
        before = after = ""
        if texts is not None and book in texts:
            start, end = _field(c, "start"), _field(c, "end")
            if start is None and _field(c, "main_spans"):
                start, end = _field(c, "main_spans")[0][0], _field(c, "main_spans")[-1][1]
            if start is not None and end is not None:
                before = texts[book][max(0, int(start) - neighbour_chars): int(start)]
                after = texts[book][int(end): int(end) + neighbour_chars]
        items.append({"item_id": item_id, "book_id": book, "unit": unit, "before": before,
                      "passage": passage, "after": after, "rater": "", **{d: "" for d in DIMENSIONS},
                      "comment": ""})
        key_rows.append({"item_id": item_id, "chunker": name, "book_id": book,
                         "unit_id": str(_field(c, "unit_id", "")), "chunk_id": str(_field(c, "chunk_id", ""))})
    sheet_csv = out / "rating_sheet.csv"
    _write_csv(sheet_csv, items)
    key_csv = out / "key.csv"
    _write_csv(key_csv, key_rows)
    instructions = out / "instructions.md"
    instructions.write_text(rater_instructions_markdown(), encoding="utf-8")
    sheet_html = out / "rating_sheet.html"
    sheet_html.write_text(render_rating_html(items, title=title, sheet_id=f"{title}-{seed}-{len(items)}"),
                          encoding="utf-8")
    return RatingExport(sheet_csv=sheet_csv, sheet_html=sheet_html, key_csv=key_csv,
                        instructions=instructions, n_items=len(items), per_chunker=per_chunker, notes=notes)


def _passage(chunk: Any, text_key: str) -> str:
    return str(_field(chunk, text_key) or _field(chunk, "text") or "")


def _write_csv(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def rater_instructions_markdown() -> str:
    lines = ["# Rating passages", "", GENERAL_GUIDE, ""]
    for d in DIMENSIONS:
        lines += [f"## {DIMENSION_TITLES[d]} (column `{d}`)", "", DIMENSION_GUIDE[d], ""]
    lines += ["## Scale", ""] + [f"- {k}: {v}" for k, v in SCALE_GUIDE.items()] + [
        "", "Fill the three score columns of `rating_sheet.csv` (or use `rating_sheet.html` and its "
        "download button), put your name or initials in the rater field, and return the file.", ""]
    return "\n".join(lines)


def render_rating_html(items: Sequence[Mapping[str, str]], *, title: str = "Passage rating",
                       sheet_id: str = "sheet") -> str:
    """A single HTML page (inline CSS and JavaScript, nothing fetched) with the guide, one card
    per item with 1-5 choices per dimension, progress saved in the browser's local storage, and a
    button that downloads the ratings as CSV (item_id, rater, the three scores, comment)."""
    e = html.escape
    guide = "".join(f"<h3>{e(DIMENSION_TITLES[d])}</h3><p>{e(DIMENSION_GUIDE[d])}</p>" for d in DIMENSIONS)
    scale = ", ".join(f"{k} = {e(v)}" for k, v in SCALE_GUIDE.items())
    cards = []
    for it in items:
        iid = e(it["item_id"])
        rows = []
        for d in DIMENSIONS:
            choices = "".join(
                f'<label><input type="radio" name="{iid}|{d}" value="{v}">{v}</label>' for v in range(1, 6))
            rows.append(f'<div class="dim"><span class="dn">{e(DIMENSION_TITLES[d])}</span>{choices}</div>')
        ctx_b = f'<div class="ctx">&hellip;{e(it["before"])}</div>' if it.get("before") else ""
        ctx_a = f'<div class="ctx">{e(it["after"])}&hellip;</div>' if it.get("after") else ""
        cards.append(
            f'<section class="item" id="{iid}"><h2>{iid} <small>{e(it["book_id"])} &middot; '
            f'{e(it["unit"])}</small></h2>{ctx_b}<div class="passage">{e(it["passage"])}</div>{ctx_a}'
            f'{"".join(rows)}<textarea name="{iid}|comment" placeholder="comment (optional)"></textarea></section>')
    ids = json.dumps([it["item_id"] for it in items])
    dims = json.dumps(list(DIMENSIONS))
    store = json.dumps(f"rating-sheet:{sheet_id}")  # no project or method names in the page
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>
<style>
body{{font-family:Georgia,serif;max-width:52em;margin:2em auto;padding:0 1em;color:#222}}
.item{{border:1px solid #ccc;border-radius:6px;padding:1em;margin:1.5em 0}}
.passage{{white-space:pre-wrap;line-height:1.5;border-left:3px solid #468;padding-left:.8em}}
.ctx{{white-space:pre-wrap;color:#999;font-size:.9em;margin:.4em 0}}
.dim{{margin:.4em 0;font-family:sans-serif}} .dn{{display:inline-block;width:13em}}
.dim label{{margin-right:1em}} textarea{{width:100%;margin-top:.5em}}
#bar{{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #ddd;font-family:sans-serif}}
</style></head><body>
<h1>{e(title)}</h1><p>{e(GENERAL_GUIDE)}</p>{guide}<p><b>Scale:</b> {scale}.</p>
<div id="bar">Rater: <input id="rater" size="12"> <button id="dl">Download ratings (CSV)</button>
<span id="progress"></span></div>
{"".join(cards)}
<script>
const IDS={ids}, DIMS={dims}, KEY={store};
function done(id){{return DIMS.every(d=>document.querySelector(`input[name="${{id}}|${{d}}"]:checked`))}}
function row(id,r){{const out=[id,r];DIMS.forEach(d=>{{const c=document.querySelector(`input[name="${{id}}|${{d}}"]:checked`);out.push(c?c.value:"")}});
 out.push(document.querySelector(`textarea[name="${{id}}|comment"]`).value);return out}}
const HEADER=["item_id","rater",...DIMS,"comment"], FILE="ratings", DONE="items complete";
{SHEET_SCRIPT}</script></body></html>
"""



#: The script both rating sheets share (this one and litseg.rag.human_pairwise's): answers kept in
#: the browser's localStorage under KEY, a progress count, and the CSV download. Each sheet defines
#: IDS, KEY, HEADER, FILE, DONE and the functions done(id) and row(id, rater) before it.
SHEET_SCRIPT = r"""const saved=JSON.parse(localStorage.getItem(KEY)||"{}");
function save(){const s={rater:document.getElementById("rater").value};
 document.querySelectorAll("input[type=radio]:checked,textarea").forEach(el=>{s[el.name]=el.value});
 localStorage.setItem(KEY,JSON.stringify(s));progress();}
function progress(){const n=IDS.filter(id=>done(id)).length;
 document.getElementById("progress").textContent=` ${n} / ${IDS.length} ${DONE}`;}
document.getElementById("rater").value=saved.rater||"";
document.querySelectorAll("input[type=radio]").forEach(el=>{if(saved[el.name]===el.value)el.checked=true});
document.querySelectorAll("textarea").forEach(el=>{el.value=saved[el.name]||""});
document.addEventListener("change",save);document.addEventListener("input",save);progress();
function q(v){v=String(v??"");return /[",\n\r]/.test(v)?'"'+v.replace(/"/g,'""')+'"':v}
document.getElementById("dl").onclick=()=>{const r=document.getElementById("rater").value.trim();
 if(!r){alert("Please enter your rater name first.");return}
 const lines=[HEADER.join(",")];IDS.forEach(id=>{lines.push(row(id,r).map(q).join(","))});
 const a=document.createElement("a");a.href=URL.createObjectURL(new Blob([lines.join("\n")+"\n"],{type:"text/csv"}));
 a.download=`${FILE}_${r.replace(/[^A-Za-z0-9_-]/g,"_")}.csv`;a.click();};
"""

# ------------------------------------------------------------------------------ reading ratings
def read_key(path: str | Path) -> dict[str, dict[str, str]]:
    """The key written by :func:`export_rating_sample` (or any CSV with ``item_id``)."""
    with Path(path).open(newline="", encoding="utf-8-sig") as fh:
        rows = list(csv.DictReader(fh))
    if not rows or "item_id" not in rows[0]:
        raise ValueError(f"{path}: a key needs an item_id column")
    return {r["item_id"].strip(): r for r in rows}


def _read_rows(source: str | Path) -> tuple[str, list[dict[str, str]]]:
    p = Path(source)
    with p.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames is None:
            raise ValueError(f"{p}: empty file")
        rows = [{_canon(k): (v or "").strip() for k, v in r.items() if k is not None} for r in reader]
    return p.stem, rows


def _score(value: str, where: str) -> int | None:
    if value == "":
        return None
    try:
        f = float(value)
    except ValueError:
        raise ValueError(f"{where}: score {value!r} is not a number") from None
    if f != int(f) or not 1 <= f <= 5:
        raise ValueError(f"{where}: score {value!r} is not an integer from 1 to 5")
    return int(f)


def read_ratings(sources: Iterable[str | Path], key: Mapping[str, Mapping[str, str]] | str | Path):
    """Filled rating sheets (one or more CSVs, any number of raters) joined with the key.

    The rater is the ``rater`` column, else the file name. Returns a pandas DataFrame in long
    form: ``item_id, rater, chunker, book_id, dimension, score`` (blank scores are left out;
    ``df.attrs["blank"]`` counts them). Raises ``ValueError`` for scores outside 1-5, item ids not
    in the key, or a rater scoring the same item twice.
    """
    import pandas as pd

    key_map = read_key(key) if isinstance(key, (str, Path)) else key
    records: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    blank = 0
    for src in sources:
        stem, rows = _read_rows(src)
        if rows and "item_id" not in rows[0]:
            raise ValueError(f"{src}: no item_id column")
        for n, r in enumerate(rows, 2):
            iid = r["item_id"]
            if not iid:
                continue
            if iid not in key_map:
                raise ValueError(f"{src}:{n}: item {iid!r} is not in the key")
            rater = r.get("rater") or stem
            if (rater, iid) in seen:
                raise ValueError(f"{src}:{n}: rater {rater!r} scored item {iid} twice")
            seen.add((rater, iid))
            for d in DIMENSIONS:
                s = _score(text_of(r, d), f"{src}:{n} {d}")
                if s is None:
                    blank += 1
                    continue
                records.append({"item_id": iid, "rater": rater, "chunker": text_of(key_map[iid], "chunker"),
                                "book_id": text_of(key_map[iid], "book_id"), "dimension": d, "score": s})
    df = pd.DataFrame.from_records(records, columns=["item_id", "rater", "chunker", "book_id", "dimension", "score"])
    df.attrs["blank"] = blank
    return df


# ---------------------------------------------------------------------------------- agreement
def summarize_ratings(df: Any, *, kappa_weights: str | None = None) -> dict[str, Any]:
    """Per-chunker means and agreement from :func:`read_ratings` output.

    ``per_chunker[chunker][dimension]``: mean over items of the raters' mean score;
    ``overall`` is the mean of the three dimension means. ``agreement[dimension]``: ICC(2,1),
    Fleiss' kappa and pairwise Cohen's kappa (``kappa_weights=None`` treats the five scores as
    categories, as the unweighted statistic does; "quadratic" respects their order).
    """
    if len(df) == 0:
        raise ValueError("no ratings")
    per_item = df.groupby(["chunker", "dimension", "item_id"])["score"].mean().reset_index()
    per_chunker: dict[str, dict[str, Any]] = {}
    for chunker, g in per_item.groupby("chunker"):
        means = {d: float(g[g["dimension"] == d]["score"].mean()) for d in DIMENSIONS
                 if (g["dimension"] == d).any()}
        entry: dict[str, Any] = dict(means)
        entry["overall"] = (sum(means.values()) / len(means)) if len(means) == len(DIMENSIONS) else None
        entry["n_items"] = int(g["item_id"].nunique())
        per_chunker[str(chunker)] = entry
    agreement: dict[str, Any] = {}
    for d in DIMENSIONS:
        sub = df[df["dimension"] == d]
        if len(sub) == 0:
            continue
        labels = labels_by_rater(sub, "score")
        agreement[d] = {"icc2_1": icc2_1(sub), "fleiss_kappa": fleiss_kappa(labels),
                        "cohen_kappa": cohen_kappas(labels, weights=kappa_weights, categories=[1, 2, 3, 4, 5])}
    return {"per_chunker": per_chunker, "agreement": agreement,
            "n_raters": int(df["rater"].nunique()), "n_items": int(df["item_id"].nunique()),
            "blank_scores": int(count_of(df.attrs, "blank"))}


# ---------------------------------------------------------------------------- pairwise answers
_JUDGEMENTS = {"win": "win", "w": "win", "loss": "loss", "lose": "loss", "l": "loss", "tie": "tie",
               "t": "tie", "draw": "tie"}
_POINTS = {"win": 1.0, "tie": 0.5, "loss": 0.0}


def read_preferences(sources: Iterable[str | Path], key: Mapping[str, Mapping[str, str]] | str | Path | None = None):
    """Win/Loss/Tie judgements (CSV columns ``item_id``, ``judgement``; optional ``rater``,
    ``comparison``), one file per rater or one file with a rater column.

    Judgements are read as "the system under test against the other". When answers were shown in
    random order, pass the ``key`` (``item_id``, ``comparison``, ``flipped``): for items whose
    ``flipped`` is true the judgement referred to the other side and Win/Loss are swapped. Returns
    a DataFrame ``item_id, rater, comparison, judgement`` with judgement in win/loss/tie.
    """
    import pandas as pd

    key_map = read_key(key) if isinstance(key, (str, Path)) else (key or {})
    records = []
    seen: set[tuple[str, str]] = set()
    for src in sources:
        stem, rows = _read_rows(src)
        if rows and not {"item_id", "judgement"} <= set(rows[0]):
            raise ValueError(f"{src}: needs item_id and judgement columns (found {sorted(rows[0])})")
        for n, r in enumerate(rows, 2):
            iid = r["item_id"]
            if not iid:
                continue
            raw = r["judgement"].strip().lower()
            if raw == "":
                continue
            if raw not in _JUDGEMENTS:
                raise ValueError(f"{src}:{n}: judgement {r['judgement']!r} is not Win, Loss or Tie")
            j = _JUDGEMENTS[raw]
            k = key_map.get(iid)
            if key_map and k is None:
                raise ValueError(f"{src}:{n}: item {iid!r} is not in the key")
            if k is not None and text_of(k, "flipped").strip().lower() in ("1", "true", "yes"):
                j = {"win": "loss", "loss": "win", "tie": "tie"}[j]
            rater = r.get("rater") or stem
            if (rater, iid) in seen:
                raise ValueError(f"{src}:{n}: rater {rater!r} judged item {iid} twice")
            seen.add((rater, iid))
            comparison = (k or {}).get("comparison") or r.get("comparison") or "all"
            records.append({"item_id": iid, "rater": rater, "comparison": comparison, "judgement": j})
    return pd.DataFrame.from_records(records, columns=["item_id", "rater", "comparison", "judgement"])


def win_rates(df: Any) -> dict[str, dict[str, Any]]:
    """Per comparison: ``win_rate`` = mean over items of the raters' mean points (win 1, tie 0.5,
    loss 0); the shares of wins, losses and ties among all judgements; agreement between raters
    (pairwise Cohen's kappa with raw agreement, Fleiss' kappa)."""
    if len(df) == 0:
        raise ValueError("no judgements")
    out: dict[str, dict[str, Any]] = {}
    for comp, g in df.groupby("comparison"):
        points = g.assign(p=g["judgement"].map(_POINTS)).groupby("item_id")["p"].mean()
        counts = g["judgement"].value_counts()
        labels = labels_by_rater(g, "judgement")
        out[str(comp)] = {
            "win_rate": float(points.mean()),
            "win": float(count_of(counts, "win") / len(g)),
            "loss": float(count_of(counts, "loss") / len(g)),
            "tie": float(count_of(counts, "tie") / len(g)),
            "n_items": int(points.size),
            "n_judgements": int(len(g)),
            "n_raters": int(g["rater"].nunique()),
            "cohen_kappa": cohen_kappas(labels, categories=["win", "loss", "tie"]),
            "fleiss_kappa": fleiss_kappa(labels),
        }
    return out
