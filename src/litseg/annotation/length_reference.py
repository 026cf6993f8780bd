"""The soft length reference: segment-length quantiles of an earlier run, put into later prompts.

::

    python annotate.py method=litseg input=CORPUS hydra.run.dir=outputs/calib        # no reference
    python -m litseg.annotation.length_reference outputs/calib --out conf/length_reference/calib.yaml
    python annotate.py method=litseg input=CORPUS length_reference=calib            # with it

The command reads the committed units of one or more run directories, measures every segment's
main range (in sentences, or in words with ``--unit words``), and writes the 25th, 50th and 75th
percentiles into a config of the ``length_reference`` group, together with the sentence that
carries them into the prompt (``hint``, a ``str.format`` template over ``{p25} {p50} {p75}``).
A prompt's own non-empty ``length_hint`` takes precedence over that sentence. The figures come
from a run *without* a length reference (the command refuses a run that had one, unless
``--force``), and units that ended in the whole-unit fallback are left out (their cuts come from
the word cap, not from the model) unless ``--include-fallbacks``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from litseg.annotation.config import LengthReferenceConfig, length_reference_from
from litseg.annotation.store import CHUNKS, LEDGER
from litseg.chunkers.groups import PromptConfig, SinglePassPrompt, StagedPrompt
from litseg.utils.jsonl import iter_jsonl
from litseg.utils.config import to_plain

QUANTILES = ("p25", "p50", "p75")
UNITS = ("sentences", "words")

#: The sentence each measure puts into the prompt; only a soft orientation, never a target.
HINTS = {
    "sentences": ("A soft reference, not a rule: in comparable books a plot block usually spans {p25} to "
                  "{p75} sentences (median {p50}). The story decides every cut; never stretch or shorten "
                  "a block to approach these figures."),
    "words": ("A soft reference, not a rule: in comparable books a plot block usually holds {p25} to "
              "{p75} words (median {p50}). The story decides every cut; never stretch or shorten a "
              "block to approach these figures."),
}


class LengthReferenceError(ValueError):
    """The runs cannot give a sound reference (too few segments, a run that had one already...)."""


def active_reference(node: Any) -> dict[str, Any] | None:
    """The reference a ``length_reference`` config node holds, or None when it is off
    (absent, ``none``, or any quantile missing)."""
    if node is None:
        return None
    if not isinstance(node, LengthReferenceConfig):
        node = to_plain(node)
        if not isinstance(node, Mapping):
            raise TypeError(f"length_reference must be a mapping, got {type(node).__name__}")
    config = length_reference_from(node)
    assert config is not None
    if any(getattr(config, q) is None for q in QUANTILES):
        return None
    ref: dict[str, Any] = {q: getattr(config, q) for q in QUANTILES}
    ref["unit"] = config.unit
    ref["hint"] = config.hint or HINTS.get(config.unit, HINTS["sentences"])
    if isinstance(node, LengthReferenceConfig) or "name" in node:
        ref["name"] = config.name
    return ref


def with_length_hint(prompt: PromptConfig, reference: Mapping[str, Any] | None) -> PromptConfig:
    """The prompt with ``length_hint`` filled from the reference when the prompt leaves it empty.

    The prompts ship with ``length_hint: ""`` (off); this is how a run with a reference gets the
    sentence into ``{length_hint}``. Rendering still needs the quantiles, which the chunker
    receives as its ``length_reference``.
    """
    if not reference or not isinstance(prompt, (SinglePassPrompt, StagedPrompt)) or prompt.length_hint:
        return prompt  # only these shapes have a {length_hint}
    return dataclasses.replace(prompt, length_hint=reference.get("hint") or HINTS["sentences"])


def segment_lengths(run_dirs: Sequence[str | Path], *, unit: str = "sentences",
                    include_fallbacks: bool = False) -> tuple[list[int], int]:
    """Main-range lengths of every segment of the committed units, and how many units gave them."""
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    lengths: list[int] = []
    keys: set[str] = set()
    for run in map(Path, run_dirs):
        if not (run / LEDGER).exists():
            raise FileNotFoundError(f"{run} is not an annotation run directory (no {LEDGER})")
        for row in iter_jsonl(run / LEDGER):
            if row.get("error") or not row.get("segments"):
                continue
            if row.get("fallback") == "whole_unit" and not include_fallbacks:
                continue
            if row["key"] in keys:
                continue
            keys.add(row["key"])
            if unit == "sentences":
                lengths.extend(int(s["to_idx"]) - int(s["from_idx"]) + 1 for s in row["segments"])
        if unit == "words":
            for chunk in iter_jsonl(run / CHUNKS):
                if chunk.get("unit_key") in keys:
                    lengths.append(len(str(chunk["main_text"]).split()))
    return lengths, len(keys)


def compute_length_reference(run_dirs: Sequence[str | Path], *, unit: str = "sentences",
                             include_fallbacks: bool = False, min_segments: int = 20,
                             force: bool = False) -> dict[str, Any]:
    """Quantiles of the segment lengths in ``run_dirs`` plus where they come from."""
    runs = [Path(r) for r in run_dirs]
    summaries = [_read_json(r / "run_summary.json") for r in runs]
    had_reference = [str(r) for r, s in zip(runs, summaries, strict=True)
                     if (s.get("fingerprint") or {}).get("length_reference")]
    if had_reference and not force:
        raise LengthReferenceError(
            f"{', '.join(had_reference)} already ran with a length reference; calibrate on a run without "
            "one (or pass --force)")
    lengths, n_units = segment_lengths(runs, unit=unit, include_fallbacks=include_fallbacks)
    if len(lengths) < max(2, min_segments):
        where = ", ".join(map(str, runs))
        raise LengthReferenceError(f"only {len(lengths)} segment(s) from {n_units} unit(s) in {where}; "
                                   f"need at least {max(2, min_segments)} (see --min-segments)")
    p25, p50, p75 = statistics.quantiles(lengths, n=4, method="inclusive")
    first = summaries[0] if summaries else {}
    return {
        "unit": unit,
        "p25": max(1, round(p25)),
        "p50": max(1, round(p50)),
        "p75": max(1, round(p75)),
        "hint": HINTS[unit],
        "source": {
            "runs": [str(r) for r in runs],
            "method": first.get("method"),
            "model": (first.get("fingerprint") or {}).get("model"),
            "n_segments": len(lengths),
            "n_units": n_units,
            "include_fallbacks": include_fallbacks,
            "exact": {"p25": p25, "p50": p50, "p75": p75, "mean": statistics.fmean(lengths),
                      "min": min(lengths), "max": max(lengths)},
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        },
    }


def write_reference(reference: Mapping[str, Any], out: str | Path, *, name: str | None = None) -> Path:
    """Write the reference as a config of the ``length_reference`` group."""
    import yaml

    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"name": name or path.stem, **reference}
    src = reference["source"]  # as compute_length_reference records it
    header = (f"# Soft length reference: segment-length quantiles ({reference['unit']}) of "
              f"{src.get('n_segments')} segments in {src.get('n_units')} units of {', '.join(src['runs'])}.\n"
              f"# Written by: python -m litseg.annotation.length_reference ... --out {path}\n"
              f"# Use: python annotate.py length_reference={path.stem} ...   (the prompt's {{length_hint}} "
              "gets `hint` filled with p25/p50/p75)\n")
    path.write_text(header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100), encoding="utf-8")
    return path


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compute a soft length reference from annotation run(s).")
    parser.add_argument("runs", nargs="+", help="run directories of a run without a length reference")
    parser.add_argument("--out", required=True, help="config to write, e.g. conf/length_reference/NAME.yaml")
    parser.add_argument("--name", default=None, help="name inside the config (default: the file's stem)")
    parser.add_argument("--unit", choices=UNITS, default="sentences")
    parser.add_argument("--include-fallbacks", action="store_true")
    parser.add_argument("--min-segments", type=int, default=20)
    parser.add_argument("--force", action="store_true", help="accept runs that had a length reference")
    args = parser.parse_args(argv)
    try:
        ref = compute_length_reference(args.runs, unit=args.unit, include_fallbacks=args.include_fallbacks,
                                       min_segments=args.min_segments, force=args.force)
    except (LengthReferenceError, FileNotFoundError) as exc:
        print(f"length_reference: {exc}", file=sys.stderr)
        return 2
    path = write_reference(ref, args.out, name=args.name)
    src = ref["source"]
    print(f"p25={ref['p25']} p50={ref['p50']} p75={ref['p75']} {ref['unit']} "
          f"({src['n_segments']} segments, {src['n_units']} units) -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
