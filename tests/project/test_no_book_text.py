"""No passage of the shared literary texts is committed: tests and examples use text written for
the project, and read the books from ../shared/data when they need them.

Every string literal of the repository's Python files, and every tracked text file, is cut into
runs of seven words; none may occur in a shared text (Project Gutenberg books, Shakespeare, the
more/ collection). Seven words is long enough that common phrases do not trigger it and short
enough to catch a quoted sentence, or one that follows a book for seven words and then turns
away (a run of eight let such a sentence through), or a chapter title with its neighbours. Headings and other short lines are caught by a
second scan: no line of a literal (three words or more) may be a line of a shared text."""

from __future__ import annotations

import ast
import json
import re
import subprocess

import pytest

from tests.conftest import REPO, shared_data_dir

WORDS = re.compile(r"[a-z]+")
N = 7
TEXT_SUFFIXES = {".md", ".txt", ".yaml", ".yml", ".jsonl", ".json", ".tsv", ".csv", ".html", ".toml"}
# Not a book's text: Project Gutenberg's own header, footer and licence lines, which the reader
# must recognise to strip them (litseg.segmentation.gutenberg and its tests), and a counting run.
FRAMING_WORDS = {"gutenberg", "ebook", "etexts"}
FRAMING_RUNS = {("small", "print")}  # the old header's "*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*"
# Files of the shared texts folder that describe the corpus rather than hold a book.
NOT_BOOKS = {"SOURCE.txt", "README.md", "README.txt"}
COUNTING = set("one two three four five six seven eight nine ten eleven twelve".split())
ALLOWED = {("you", "accept", "and", "agree", "to", "be", "bound", "by")}   # licence wording


def allowed(run: tuple[str, ...], titles: set[tuple[str, ...]] = frozenset()) -> bool:
    framing = not FRAMING_WORDS.isdisjoint(run) or any(
        pair == run[i:i + 2] for pair in FRAMING_RUNS for i in range(len(run) - 1))
    # a book named in passing: its title (up to six words) with one word of ours before or after it
    named = run[1:] in titles or run[:-1] in titles
    return run in ALLOWED or run in titles or named or framing or set(run) <= COUNTING


def book_titles(texts) -> set[tuple[str, ...]]:
    """Runs of the shared books' titles (file names, the manifest): reports name the books. Runs of
    ``N`` words, and each file name's own words whole when it is shorter."""
    stems = [p.stem.replace("_", " ") for p in texts.rglob("*")]
    manifest = texts / "manifest.tsv"
    runs = shingles(" | ".join(stems) + " " + (manifest.read_text(encoding="utf-8") if manifest.is_file() else ""))
    return runs | {tuple(WORDS.findall(stem.lower())) for stem in stems}


def shingles(text: str) -> set[tuple[str, ...]]:
    words = WORDS.findall(text.lower())
    return {tuple(words[i:i + N]) for i in range(len(words) - N + 1)}


def prose_of(path) -> str:
    """A tracked text file's words; of a JSON record, only its strings with a space in them (a book
    id such as ``the-keeper-and-the-seven-gulls`` in a training record names a text, it is not
    its text)."""
    raw = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".json":
        return raw
    try:
        data = json.loads(raw)
    except ValueError:
        return raw
    out: list[str] = []

    def walk(x) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                walk(k)
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, str) and any(ch.isspace() for ch in x.strip()):
            out.append(x)

    walk(data)
    return "\n".join(out)


def repo_shingles() -> dict[tuple[str, ...], str]:
    """Eight-word runs of every string literal in the tracked Python files and of every tracked
    text file (docs, configs, prompts, labelled cases), with where they are."""
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    found: dict[tuple[str, ...], str] = {}
    for name in files:
        path = REPO / name
        if name.endswith(".py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    for s in shingles(node.value):
                        found.setdefault(s, f"{name}:{node.lineno}")
        elif path.suffix in TEXT_SUFFIXES and path.is_file():
            for s in shingles(prose_of(path)):
                found.setdefault(s, name)
    return found


@pytest.mark.shared_data
def test_no_passage_of_a_shared_text_is_in_the_code() -> None:
    texts = shared_data_dir() / "texts"
    ours = repo_shingles()
    assert ours, "no string literal found: the scan is broken"
    titles = book_titles(texts)
    hits: dict[str, str] = {}
    for path in sorted(p for p in texts.rglob("*") if p.suffix in (".txt", ".md") and p.name not in NOT_BOOKS):
        words = WORDS.findall(path.read_text(encoding="utf-8", errors="replace").lower())
        for i in range(len(words) - N + 1):
            run = tuple(words[i:i + N])
            if run in ours and not allowed(run, titles):
                hits.setdefault(ours[run], f"{' '.join(run)!r} from {path.relative_to(texts)}")
    assert hits == {}


# Whole lines: a heading or a short line of a book ("CANTO FIRST. THE QUAY.") is too short for a
# seven-word run, so every line of every string literal of three words or more is also looked up
# among the shared texts' own lines (spacing and markdown marks ignored).
LINE_MARKS = "#*_ "
GENERIC_LINES = {"I cannot tell."}   # a reply a test model gives, common to many books


def _line(text: str) -> str:
    return " ".join(text.strip(LINE_MARKS).split())


def literal_lines() -> dict[str, str]:
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    found: dict[str, str] = {}
    for name in files:
        for node in ast.walk(ast.parse((REPO / name).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for piece in node.value.splitlines():
                    line = _line(piece)
                    if len(line.split()) >= 3 and len(line) >= 12:
                        found.setdefault(line, f"{name}:{node.lineno}")
    return found


@pytest.mark.shared_data
def test_no_line_of_a_shared_text_is_a_literal() -> None:
    texts = shared_data_dir() / "texts"
    ours = literal_lines()
    assert ours, "no literal line found: the scan is broken"
    titles = book_titles(texts)
    hits = {}
    for path in sorted(p for p in texts.rglob("*") if p.suffix in (".txt", ".md") and p.name not in NOT_BOOKS):
        for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
            line = _line(raw)
            if line in ours and line not in GENERIC_LINES:
                words = tuple(WORDS.findall(line.lower()))
                framing = not FRAMING_WORDS.isdisjoint(words) or "license" in words
                title = len(words) < N and any(words == run[:len(words)] for run in titles) if words else False
                if not (framing or title):
                    hits.setdefault(ours[line], f"{line!r} from {path.relative_to(texts)}")
    assert hits == {}


def test_the_scan_catches_seven_words_and_reads_ids_in_records_as_names(tmp_path) -> None:
    book = "It was late, and part of the catch was sold before the boats came in at noon."
    ours = shingles("Part of the catch was sold before noon.")  # follows the book for seven words
    assert any(run in ours for run in shingles(book))
    record = tmp_path / "record.json"
    record.write_text(json.dumps({"books": ["the-keeper-and-the-seven-gulls-of-the-quay"],
                                  "note": "a sentence with spaces is text"}))
    assert prose_of(record) == "a sentence with spaces is text"
    assert allowed(("by", "the", "keeper", "and", "the", "seven", "gulls"),
                   {("the", "keeper", "and", "the", "seven", "gulls")})  # a six-word title named in passing
    assert not allowed(("part", "of", "the", "catch", "was", "sold", "before"))
