"""Metrics for comparing chunkers: retrieval, chunk statistics, generation and segment quality.

Everything here works on plain Python values (ranked relevance lists, strings, spans), so the
retrieval pipeline and ``evaluate.py`` decide what is relevant and this module only scores it.
Heavy or optional libraries (``rouge-score``, ``nltk``) are imported inside the functions that
need them; ``numpy`` is imported at module level (it is light and always installed).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import tempfile
import unicodedata
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np


Span = tuple[int, int]
DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10)


# ------------------------------------------------------------------------------------- retrieval
def rank_candidates(scores: Sequence[float], keys: Sequence[Any] | None = None) -> list[int]:
    """Indices of ``scores`` from best to worst.

    Ties are broken deterministically by ``keys`` (ascending), by default the candidates' own
    order, i.e. book order for chunks listed as they appear in the book. NaN scores rank last.
    A retriever that already returns a ranked list does not need this.
    """
    if keys is not None and len(keys) != len(scores):
        raise ValueError("keys must be as long as scores")
    order_keys = keys if keys is not None else range(len(scores))

    def sort_key(i: int) -> tuple[bool, float, Any]:
        s = float(scores[i])
        return (math.isnan(s), -s if not math.isnan(s) else 0.0, order_keys[i])

    return sorted(range(len(scores)), key=sort_key)


def first_relevant_rank(relevance: Sequence[bool]) -> int | None:
    """1-based rank of the first relevant candidate in a ranked list, or None."""
    for i, rel in enumerate(relevance, 1):
        if rel:
            return i
    return None


def reciprocal_rank(relevance: Sequence[bool], k: int | None = None) -> float:
    """1/rank of the first relevant candidate, 0 if there is none within the first ``k``."""
    r = first_relevant_rank(relevance)
    if r is None or (k is not None and r > k):
        return 0.0
    return 1.0 / r


def hit_at_k(relevance: Sequence[bool], k: int) -> float:
    """1.0 when a relevant candidate is among the first ``k``, else 0.0."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return 1.0 if any(relevance[:k]) else 0.0


def question_retrieval_scores(relevance: Sequence[bool], ks: Sequence[int] = DEFAULT_KS,
                              mrr_k: int | None = 10) -> dict[str, float]:
    """Per-question scores: ``mrr@<mrr_k>`` (or ``mrr`` when uncut) and ``hit@<k>`` for each k."""
    out = {f"mrr@{mrr_k}" if mrr_k else "mrr": reciprocal_rank(relevance, mrr_k)}
    for k in ks:
        out[f"hit@{k}"] = hit_at_k(relevance, k)
    return out


def retrieval_scores(rankings: Sequence[Sequence[bool]], ks: Sequence[int] = DEFAULT_KS,
                     mrr_k: int | None = 10) -> dict[str, float]:
    """Means over questions of :func:`question_retrieval_scores`, plus ``n_questions``.

    Each ranking lists, best first, whether each retrieved candidate is relevant. A question
    whose list holds no relevant candidate scores 0 everywhere; questions without any relevant
    candidate in the whole book should be dropped (or reported) by the caller.
    """
    if not rankings:
        raise ValueError("no rankings to score")
    rows = [question_retrieval_scores(r, ks, mrr_k) for r in rankings]
    out = {k: float(np.mean([row[k] for row in rows])) for k in rows[0]}
    out["n_questions"] = float(len(rows))
    return out


def random_hit_at_k(n_relevant: int, n_candidates: int, k: int) -> float:
    """Expected Hit@k of a uniformly random ranking: 1 - C(n-r, k) / C(n, k).
    For k=1 this is r/n, the share of relevant candidates."""
    _check_counts(n_relevant, n_candidates)
    if n_relevant == 0:
        return 0.0
    if k >= n_candidates:
        return 1.0
    return 1.0 - math.comb(n_candidates - n_relevant, k) / math.comb(n_candidates, k)


def random_mrr(n_relevant: int, n_candidates: int, k: int | None = None) -> float:
    """Expected reciprocal rank (cut at ``k``) of the first relevant candidate under a uniformly
    random ranking: sum over i of (1/i) * P(first relevant at rank i), with
    P(i) = C(n-i, r-1) / C(n, r)."""
    _check_counts(n_relevant, n_candidates)
    if n_relevant == 0:
        return 0.0
    last = n_candidates - n_relevant + 1
    if k is not None:
        last = min(last, k)
    total = math.comb(n_candidates, n_relevant)
    return sum(math.comb(n_candidates - i, n_relevant - 1) / total / i for i in range(1, last + 1))


def _check_counts(n_relevant: int, n_candidates: int) -> None:
    if n_candidates < 1 or not 0 <= n_relevant <= n_candidates:
        raise ValueError(f"need 0 <= n_relevant <= n_candidates and n_candidates >= 1, "
                         f"got {n_relevant}, {n_candidates}")


def random_retrieval_scores(counts: Sequence[tuple[int, int]], ks: Sequence[int] = DEFAULT_KS,
                            mrr_k: int | None = 10) -> dict[str, float]:
    """What a random ranking of the same chunks would score, averaged over questions; ``counts``
    holds ``(n_relevant, n_candidates)`` per question. Report it beside the real scores: with
    few, large chunks per book a random ranking already scores high."""
    if not counts:
        raise ValueError("no questions")
    out = {f"mrr@{mrr_k}" if mrr_k else "mrr": float(np.mean([random_mrr(r, n, mrr_k) for r, n in counts]))}
    for k in ks:
        out[f"hit@{k}"] = float(np.mean([random_hit_at_k(r, n, k) for r, n in counts]))
    out["n_questions"] = float(len(counts))
    return out



# ------------------------------------------------------------------------------------ generation
def normalize_answer(text: str) -> str:
    """SQuAD-style answer normalisation: lower case, drop punctuation (all Unicode punctuation,
    so curly quotes and dashes go as well as ASCII ones), drop the articles a/an/the, collapse
    whitespace."""
    text = text.lower()
    text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _refs(references: str | Sequence[str]) -> list[str]:
    refs = [references] if isinstance(references, str) else list(references)
    if not refs:
        raise ValueError("no reference answers")
    return refs


def exact_match(prediction: str, references: str | Sequence[str]) -> float:
    """1.0 when the normalised prediction equals any normalised reference."""
    p = normalize_answer(prediction)
    return max(1.0 if p == normalize_answer(r) else 0.0 for r in _refs(references))


def _f1(pred_tokens: list[str], ref_tokens: list[str]) -> float:
    if not pred_tokens or not ref_tokens:
        return 1.0 if pred_tokens == ref_tokens else 0.0
    common = sum((Counter(pred_tokens) & Counter(ref_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(pred_tokens)
    recall = common / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, references: str | Sequence[str]) -> float:
    """SQuAD token F1 between normalised answers, the best over the references."""
    p = normalize_answer(prediction).split()
    return max(_f1(p, normalize_answer(r).split()) for r in _refs(references))


@lru_cache(maxsize=4)
def _rouge_scorer(use_stemmer: bool) -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=use_stemmer)


def rouge_l(prediction: str, references: str | Sequence[str], *, use_stemmer: bool = True) -> float:
    """ROUGE-L F-measure (``rouge-score`` package; its tokenizer lower-cases and keeps
    alphanumeric tokens; Porter stemming on by default), the best over the references."""
    scorer = _rouge_scorer(use_stemmer)
    return max(scorer.score(r, prediction)["rougeL"].fmeasure for r in _refs(references))


# METEOR needs WordNet. The lexicographer-file table below is part of every WordNet 3.0 database
# (its ``lexnames`` file); Debian's wordnet-base package omits that one file, which nltk's reader
# needs, so it is written next to a copy of the Debian files.
_LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body "
    "noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location "
    "noun.motive noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process "
    "noun.quantity noun.relation noun.shape noun.state noun.substance noun.time verb.body verb.change "
    "verb.cognition verb.communication verb.competition verb.consumption verb.contact verb.creation "
    "verb.emotion verb.motion verb.perception verb.possession verb.social verb.stative verb.weather "
    "adj.ppl"
).split()
_LEX_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
_WORDNET_FILES = ("data.adj", "data.adv", "data.noun", "data.verb", "index.adj", "index.adv",
                  "index.noun", "index.verb", "adj.exc", "adv.exc", "noun.exc", "verb.exc")
#: Where system packages put the WordNet 3.0 database (Debian/Ubuntu ``wordnet-base``; others).
SYSTEM_WORDNET_DIRS = ("/usr/share/wordnet", "/usr/share/wordnet/dict", "/usr/local/WordNet-3.0/dict",
                       "/usr/local/share/wordnet", "/opt/homebrew/share/wordnet/dict")
WORDNET_INSTALL_HINT = ("METEOR needs the WordNet 3.0 database, read offline. Install it with "
                        "`apt-get install -y --no-install-recommends wordnet-base` (Debian/Ubuntu; "
                        "files in /usr/share/wordnet), or run `python -m nltk.downloader wordnet` once "
                        "where the network is reachable, or set LITSEG_WORDNET_DIR to a WordNet 3.0 "
                        "dict folder.")

_COPY_MARKER = ".litseg-copy"  # marks our copies, so a later lookup does not mistake one for nltk's own
_wordnet_state: dict[str, Any] = {}


def litseg_cache_dir() -> Path:
    """``$LITSEG_CACHE_DIR``, else ``$XDG_CACHE_HOME/litseg``, else ``~/.cache/litseg``."""
    if os.environ.get("LITSEG_CACHE_DIR"):
        return Path(os.environ["LITSEG_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "litseg"


def _is_wordnet_dir(d: Path) -> bool:
    return all((d / f).is_file() for f in _WORDNET_FILES)


def _nltk_layout(src: Path, cache_dir: Path) -> Path:
    """``<cache>/nltk_data/corpora/wordnet`` holding a copy of ``src`` plus ``lexnames`` if
    missing. Built in a temporary folder and renamed, so concurrent runs never see half a copy."""
    target = cache_dir / "nltk_data" / "corpora" / "wordnet"
    if _is_wordnet_dir(target) and (target / "lexnames").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".wordnet-", dir=target.parent))
    try:
        for f in src.iterdir():
            if f.is_file() and (f.name in _WORDNET_FILES or f.name in ("lexnames", "cntlist.rev",
                                                                      "index.sense")):
                shutil.copyfile(f, tmp / f.name)
        (tmp / _COPY_MARKER).write_text(f"copied from {src}\n", encoding="utf-8")
        if not (tmp / "lexnames").is_file():
            lines = [f"{i:02d}\t{name}\t{_LEX_CATEGORY[name.split('.')[0]]}\n"
                     for i, name in enumerate(_LEXNAMES)]
            (tmp / "lexnames").write_text("".join(lines), encoding="utf-8")
        tmp.chmod(0o755)  # mkdtemp makes it private; the copied database is public data
        try:
            tmp.rename(target)
        except OSError:
            if not _is_wordnet_dir(target):  # another process did not win the race either
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def load_wordnet(cache_dir: str | Path | None = None, *, refresh: bool = False) -> Any | None:
    """An nltk WordNet reader usable offline, or None (see :func:`wordnet_status` for why).

    Tried in order: ``$LITSEG_WORDNET_DIR`` (a WordNet 3.0 dict folder); nltk's own
    ``corpora/wordnet`` if it was downloaded; a system copy (:data:`SYSTEM_WORDNET_DIRS`, e.g.
    Debian's ``wordnet-base`` in /usr/share/wordnet). A system copy is copied once into
    ``<cache_dir>/nltk_data/corpora/wordnet`` (default :func:`litseg_cache_dir`, ~30 MB), because
    nltk only reads folders under its data path and needs a ``lexnames`` file Debian leaves out.
    """
    if "reader" in _wordnet_state and not refresh:
        return _wordnet_state["reader"]
    reader, status = _find_wordnet(Path(cache_dir) if cache_dir is not None else litseg_cache_dir())
    _wordnet_state.update(reader=reader, status=status, warned=False)
    return reader


def wordnet_status() -> str:
    """Where WordNet was loaded from, or why it is unavailable (loads it if not tried yet)."""
    if "status" not in _wordnet_state:
        load_wordnet()
    return str(_wordnet_state["status"])


def _find_wordnet(cache_dir: Path) -> tuple[Any | None, str]:
    try:
        import nltk
        from nltk.corpus.reader.wordnet import WordNetCorpusReader
    except ImportError:
        return None, "nltk is not installed (pip install nltk)"

    class EnglishWordNet(WordNetCorpusReader):
        # nltk maps every WordNet onto its own 3.0 copy for multilingual (OMW) lookups, reading
        # index.sense of a corpus named "wordnet"; METEOR never uses OMW, so the map is skipped.
        def map_wn(self, version: str = "wordnet") -> None:
            return None

    problems: list[str] = []

    def from_folder(d: Path) -> Any | None:
        try:
            layout = _nltk_layout(d, cache_dir)
            root = str(layout.parent.parent)
            if root not in nltk.data.path:
                nltk.data.path.append(root)  # nltk refuses to read outside its data path
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "multilingual functions are not available"
                reader = EnglishWordNet(str(layout), None)
            reader.synsets("dog")  # fail here, not in the middle of an evaluation
            return reader
        except Exception as exc:  # a broken copy must mean "no METEOR", never a crashed run
            problems.append(f"{d}: {type(exc).__name__}: {exc}")
            return None

    env_dir = os.environ.get("LITSEG_WORDNET_DIR")
    if env_dir:
        if _is_wordnet_dir(Path(env_dir)):
            reader = from_folder(Path(env_dir))
            if reader is not None:
                return reader, f"LITSEG_WORDNET_DIR={env_dir}"
        else:
            problems.append(f"LITSEG_WORDNET_DIR={env_dir} lacks the WordNet database files")
    try:
        found = str(nltk.data.find("corpora/wordnet"))
        if not (Path(found) / _COPY_MARKER).exists():
            from nltk.corpus import wordnet as nltk_wordnet

            nltk_wordnet.ensure_loaded()
            return nltk_wordnet, f"nltk data ({found})"
    except LookupError:
        pass
    except Exception as exc:
        problems.append(f"nltk data: {type(exc).__name__}: {exc}")
    for d in map(Path, SYSTEM_WORDNET_DIRS):
        if _is_wordnet_dir(d):
            reader = from_folder(d)
            if reader is not None:
                return reader, f"{d} (read from {cache_dir / 'nltk_data/corpora/wordnet'})"
    why = f" ({'; '.join(problems)})" if problems else ""
    return None, f"no WordNet found{why}. {WORDNET_INSTALL_HINT}"


_METEOR_TOKEN = re.compile(r"\w+(?:['\u2019]\w+)*")


def meteor_tokens(text: str) -> list[str]:
    """Lower-cased word tokens (punctuation dropped) as fed to METEOR; no nltk data needed."""
    return _METEOR_TOKEN.findall(text.lower())


def meteor(prediction: str, references: str | Sequence[str], *, wordnet: Any | None = None) -> float | None:
    """METEOR (nltk's ``meteor_score``: exact, stem and WordNet-synonym matches; best over the
    references), or None with a warning when no WordNet database is available offline."""
    refs = _refs(references)
    wn = wordnet if wordnet is not None else load_wordnet()
    if wn is None:
        if not _wordnet_state.get("warned"):
            warnings.warn(f"METEOR skipped: {wordnet_status()}", RuntimeWarning, stacklevel=2)
            _wordnet_state["warned"] = True
        return None
    from nltk.translate.meteor_score import meteor_score

    return float(meteor_score([meteor_tokens(r) for r in refs], meteor_tokens(prediction), wordnet=wn))


GENERATION_METRICS: dict[str, Callable[[str, Sequence[str]], float | None]] = {
    "em": exact_match,
    "f1": token_f1,
    "rougeL": rouge_l,
    "meteor": meteor,
}


def generation_scores(predictions: Sequence[str], references: Sequence[Sequence[str]],
                      metrics: Sequence[str] = ("em", "f1", "rougeL", "meteor")) -> dict[str, Any]:
    """Per-question and mean answer scores. ``references[i]`` are question i's reference answers.
    A metric that cannot run (METEOR without WordNet) has mean None and per-question Nones."""
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} reference lists")
    unknown = [m for m in metrics if m not in GENERATION_METRICS]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; known: {sorted(GENERATION_METRICS)}")
    per_question: dict[str, list[float | None]] = {}
    means: dict[str, float | None] = {}
    for m in metrics:
        vals = [GENERATION_METRICS[m](p, r) for p, r in zip(predictions, references)]
        per_question[m] = vals
        got = [v for v in vals if v is not None]
        means[m] = float(np.mean(got)) if got and len(got) == len(vals) else None
    return {"n_questions": len(predictions), "mean": means, "per_question": per_question}
