"""Make the book split of the strong-teacher units: which books train the students, which ones
select models, which ones only ever score them.

    python benchmarks/teacher_split.py            # prints the split and its mix of kinds
    python benchmarks/teacher_split.py --write    # writes src/litseg/data/splits/teacher-v2.json

Units are split by **book**, never by chapter. Rules, in this order:

* ``excluded``: books of the whole-novel benchmark (``benchmarks/novelqa``) that the first shipped
  student already trained on. They stay out of every new training run, so the novelqa table
  measures the new students on books they never saw; they cannot score the old student fairly, so
  they are not in ``test`` either.
* ``test``: the held-out books of the student table (docs/training.md). Only books the first shipped
  student never saw are eligible (its model card lists its training books), so every row of the
  table, that student's included, is scored on unseen books. The novelqa books among them are taken
  first; the rest is a seeded draw per kind (fairy tale, prose, play) until each kind reaches its
  share of the target.
* ``validation``: a seeded draw per kind from the remaining books, for model selection and early
  stopping; never reported as a result.
* everything else trains.

The file records the seed, the targets and the unit counts, so a rerun of this script on the same
teacher file gives the same split.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LITSEG_SHARED_DIR", REPO.parent / "shared"))
TEACHER_FILE = SHARED / "data" / "teacher" / "litseg_teacher_units.jsonl"
NOVELQA_FILE = SHARED / "data" / "benchmarks" / "novelqa" / "questions.jsonl"
FIRST_STUDENT = REPO / "src" / "litseg" / "models" / "litseg-lite-smollm2-135m" / "litseg_adapter.json"
OUT = REPO / "src" / "litseg" / "data" / "splits" / "teacher-v2.json"
sys.path.insert(0, str(REPO / "src"))

from litseg.training.splits import kind_of_source  # noqa: E402

SEED = 0
# Units (teacher records) per kind in the test split and the validation split.
TEST_TARGET = {"fairytale": 20, "prose": 24, "play": 10}
VALIDATION_TARGET = {"fairytale": 20, "prose": 18, "play": 8, "poem": 0}


kind_of = kind_of_source  # one rule for the split and for the tables that report by kind


def novelqa_book_numbers() -> set[str]:
    """Gutenberg numbers of the novelqa books (the leading number of each text file's name)."""
    numbers = set()
    for line in NOVELQA_FILE.read_text(encoding="utf-8").splitlines():
        if line.strip():
            numbers.add(Path(json.loads(line)["file"]).name.split("_")[0])
    return numbers


def seeded_order(books: list[str], salt: str) -> list[str]:
    return sorted(books, key=lambda b: hashlib.sha256(f"{SEED}:{salt}:{b}".encode()).hexdigest())


def draw(books_by_kind: dict[str, list[str]], units: dict[str, int], target: dict[str, int],
         taken: dict[str, int], salt: str) -> list[str]:
    """Books drawn per kind, in a seeded order, until each kind has its target of units."""
    chosen = []
    for kind, want in target.items():
        have = taken.get(kind, 0)
        for book in seeded_order(books_by_kind.get(kind, []), salt):
            if have >= want:
                break
            chosen.append(book)
            have += units[book]
    return chosen


def make_split() -> dict:
    records = [json.loads(line) for line in TEACHER_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]
    units = collections.Counter(r["book_id"] for r in records)
    kind = {r["book_id"]: kind_of(r["source"]) for r in records}
    first_student = set(json.loads(FIRST_STUDENT.read_text())["data"]["books"]["train"])
    numbers = novelqa_book_numbers()
    novelqa = {b for b in units if b.split("-")[0] in numbers}
    excluded = sorted(novelqa & first_student)
    test = sorted(novelqa - first_student)
    taken = collections.Counter(kind[b] for b in test for _ in range(units[b]))
    eligible = collections.defaultdict(list)
    for b in sorted(units):
        if b not in first_student and b not in novelqa:
            eligible[kind[b]].append(b)
    test += draw(eligible, units, TEST_TARGET, taken, "test")
    rest = collections.defaultdict(list)
    for b in sorted(units):
        if b not in test and b not in excluded:
            rest[kind[b]].append(b)
    validation = draw(rest, units, VALIDATION_TARGET, {}, "validation")

    def summary(books: list[str]) -> dict:
        per_kind = collections.Counter()
        for b in books:
            per_kind[kind[b]] += units[b]
        return {"books": len(books), "units": sum(units[b] for b in books), "units_by_kind": dict(sorted(per_kind.items()))}

    train = [b for b in sorted(units) if b not in set(test) | set(validation) | set(excluded)]
    return {
        "name": "teacher-v2",
        "made_by": "python benchmarks/teacher_split.py --write",
        "teacher_file": "data/teacher/litseg_teacher_units.jsonl",
        "seed": SEED,
        "test_target_units": TEST_TARGET,
        "validation_target_units": VALIDATION_TARGET,
        "counts": {"train": summary(train), "validation": summary(validation), "test": summary(test),
                   "excluded": summary(excluded)},
        "test": sorted(test),
        "validation": sorted(validation),
        "excluded": excluded,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(REPO)}")
    args = parser.parse_args()
    if not TEACHER_FILE.is_file():
        sys.exit(f"teacher file not found: {TEACHER_FILE} (set LITSEG_SHARED_DIR)")
    split = make_split()
    print(json.dumps(split["counts"], indent=1))
    if args.write:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(split, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
