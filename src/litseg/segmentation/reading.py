"""Reading books from disk into :class:`~litseg.segmentation.types.Document` records.

Plain text and Markdown keep their decoded characters exactly (line endings untouched, a UTF-8
BOM removed), so every offset maps back to the file. EPUB and HTML books are converted to plain
text first - paragraphs separated by a blank line, headings on their own line marked Markdown
style (``## Chapter I``) so that the structure finder sees them - and that extracted text is
the document's text.
"""

from __future__ import annotations

import glob
import importlib.util
import logging
import re
import unicodedata
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from litseg.segmentation.gutenberg import header_metadata
from litseg.segmentation.types import Document

log = logging.getLogger(__name__)

TEXT_SUFFIXES = (".txt", ".md", ".markdown")
HTML_SUFFIXES = (".html", ".htm", ".xhtml")
EPUB_SUFFIXES = (".epub",)
BOOK_SUFFIXES = TEXT_SUFFIXES + HTML_SUFFIXES + EPUB_SUFFIXES

# Control characters that never occur in real text files (tab, newlines and form feed excluded).
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_WESTERN = ("cp1252", "latin_1", "iso8859_15")
_BOMS = (
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)


class ReadError(ValueError):
    """A file that cannot be turned into a document (empty, binary, unreadable, broken EPUB)."""


class EmptyInput(ReadError):
    """A file with nothing but whitespace in it: nothing to segment, nothing lost."""


# Formats that are not books annotate reads, known by their first bytes: such a file is skipped
# as unsupported whatever its name says (a PDF saved as .txt is still a PDF, and a PDF's syntax is
# often plain ASCII that would otherwise be chunked as text).
_MAGIC = (
    (b"%PDF-", "PDF"), (b"{\\rtf", "RTF"), (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "MS Office (.doc)"),
    (b"\x89PNG", "PNG image"), (b"\xff\xd8\xff", "JPEG image"), (b"GIF8", "GIF image"), (b"\x1f\x8b", "gzip"),
    (b"7z\xbc\xaf", "7-Zip"), (b"Rar!", "RAR"), (b"AT&TFORM", "DjVu"),
)


def unsupported_format(path: Path) -> str | None:
    """Why ``path`` is not a book annotate reads (its format, by its first bytes or its name), or
    None. A name without a suffix is read as text unless its bytes say otherwise."""
    try:
        with path.open("rb") as f:
            head = f.read(68)
    except OSError:
        return None  # reading it reports the error
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return f"unsupported format ({name})"
    if head[60:68] == b"BOOKMOBI":
        return "unsupported format (MOBI/AZW)"
    suffix = path.suffix.lower()
    if head.startswith(b"PK\x03\x04") and suffix not in EPUB_SUFFIXES:
        return "unsupported format (a ZIP archive such as .docx or .odt)"
    if suffix and suffix not in BOOK_SUFFIXES:
        return f"unsupported format ({suffix}; books are {', '.join(BOOK_SUFFIXES)})"
    return None


@dataclass(frozen=True)
class InputScan:
    """What an input spec names: the book files to read and the files left out, each with why."""

    books: list[Path]
    skipped: list[tuple[Path, str]]


@dataclass(frozen=True, slots=True)
class ReadFailure:
    """One book of a batch that failed; the batch goes on without it."""

    path: Path
    error: BaseException

    @property
    def message(self) -> str:
        return f"{type(self.error).__name__}: {self.error}"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def slugify(name: str) -> str:
    """A lowercase ASCII id from a file stem: ``"1342_Pride & Prejudice"`` -> ``"1342-pride-prejudice"``."""
    ascii_name = unicodedata.normalize("NFKD", name.casefold()).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")
    return slug or "book"


def iter_input_paths(spec: str | Path | Sequence[str | Path]) -> list[Path]:
    """Book files named by ``spec`` (:func:`scan_inputs`); raises :class:`FileNotFoundError`
    naming the spec, or the files and why they cannot be read, when there is none."""
    return scan_inputs(spec).books


def scan_inputs(spec: str | Path | Sequence[str | Path]) -> InputScan:
    """Every file named by ``spec`` (a file, a directory searched recursively, a glob pattern, or
    a sequence of those), sorted and de-duplicated: the books (.txt, .md, .epub, .html, .htm)
    and the files skipped with why (an unsupported format, by content or name; hidden files in
    directories are not inputs). Raises :class:`FileNotFoundError` when there is no book."""
    specs: Iterable[str | Path] = [spec] if isinstance(spec, (str, Path)) else spec
    found: dict[Path, Path] = {}
    tried: list[str] = []
    for item in specs:
        tried.append(str(item))
        for path in _expand(item):
            found.setdefault(path.resolve(), path)
    books: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    for path in sorted(found.values(), key=lambda p: str(p)):
        why = unsupported_format(path)
        if why is None:
            books.append(path)
        else:
            skipped.append((path, why))
    if books:
        return InputScan(books, skipped)
    if skipped:
        listed = "; ".join(f"{p}: {why}" for p, why in skipped[:3]) + ("; ..." if len(skipped) > 3 else "")
        raise FileNotFoundError(f"no book to read in {', '.join(map(repr, tried))}: {listed}")
    raise FileNotFoundError(f"no book files match {', '.join(map(repr, tried)) or '[]'} (looked for existing "
                            f"files, directories or globs of {', '.join(BOOK_SUFFIXES)})")


def _expand(item: str | Path) -> list[Path]:
    """The files ``item`` names (in directories, every file that is not hidden)."""
    path = Path(item).expanduser()
    if path.is_file():
        return [path]
    if path.is_dir():
        return [p for p in path.rglob("*") if p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(path).parts)]
    out: list[Path] = []
    for m in glob.glob(str(path), recursive=True):
        p = Path(m)
        out.extend([p] if p.is_file() else _expand(p) if p.is_dir() else [])
    return out


def read_document(path: str | Path, *, book_id: str | None = None) -> Document:
    """Read one book file into a :class:`Document` (no stripping or structure yet).

    Title and author come from a Project Gutenberg header, EPUB/HTML metadata or a leading
    Markdown ``# Title`` when present. Raises :class:`ReadError` for empty, binary or broken input.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ReadError(f"{path}: cannot read file ({exc.strerror or exc})") from exc
    if not data.strip():
        raise EmptyInput(f"{path}: file is empty")
    suffix = path.suffix.lower()
    warns: list[str] = []
    title = author = ""
    if suffix in EPUB_SUFFIXES:
        text, title, author = _read_epub(path, data)
        encoding = "epub"
    elif suffix in HTML_SUFFIXES:
        text, encoding, title, author = _read_html(path, data)
    else:
        text, encoding, note = decode_bytes(data, name=str(path))
        if note:
            warns.append(note)
    if not text.strip():
        raise ReadError(f"{path}: no text found in file")
    pg_title, pg_author = header_metadata(text)
    title = pg_title or title
    author = pg_author or author
    if not title and suffix in (".md", ".markdown"):
        m = re.match(r"\s*#\s+([^\r\n#]+)", text)
        title = m.group(1).strip() if m else ""
    for w in warns:
        log.warning(w)
    return Document(book_id=book_id or slugify(path.stem), text=text, title=title,
                    author=author, source_path=str(path), encoding=encoding, warnings=warns)


def decode_bytes(data: bytes, *, name: str = "<bytes>") -> tuple[str, str, str]:
    """Decode a text file's bytes: ``(text, encoding, warning)``; ``warning`` is empty unless the
    encoding had to be guessed. A BOM is removed; line endings are kept as they are."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                text = data.decode(codec)
            except UnicodeDecodeError as exc:
                raise ReadError(f"{name}: starts with a {codec} byte-order mark but does not "
                                f"decode as {codec} ({exc.reason})") from exc
            return _check_text(text.lstrip("\ufeff"), name), codec.replace("-sig", ""), ""
    if b"\x00" in data[:65536]:
        raise ReadError(f"{name}: looks like a binary file (NUL bytes), not a text book")
    try:
        return _check_text(data.decode("utf-8"), name), "utf-8", ""
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    results = list(from_bytes(data))
    best = results[0] if results else None
    if best is not None:
        # Detection on short or repetitive text often ranks a Baltic or Central European code page
        # first; old books are overwhelmingly Western European, so a Western code page that reads
        # the bytes about as cleanly wins.
        for m in results:
            if m.encoding in _WESTERN and m.chaos <= best.chaos + 0.05:
                best = m
                break
    if best is None:
        raise ReadError(f"{name}: not valid UTF-8 and no text encoding could be detected "
                        f"(binary file?)")
    text = str(best)
    encoding = str(best.encoding)
    return _check_text(text, name), encoding, (
        f"{name}: not valid UTF-8; decoded as {encoding} (detected by charset-normalizer)")


def _check_text(text: str, name: str) -> str:
    sample = text[:65536]
    if sample and len(_CONTROL.findall(sample)) > max(2, len(sample) // 200):
        raise ReadError(f"{name}: looks like a binary file (control characters), not a text book")
    return text


# --------------------------------------------------------------------------- HTML and EPUB

_BLOCK_TAGS = frozenset(
    "p div section article aside blockquote li ul ol dl dt dd table thead tbody tfoot tr td th "
    "pre header footer figure figcaption address center hr main nav body html".split())
_HEADING_TAGS = {f"h{i}": i for i in range(1, 7)}
_SKIP_TAGS = frozenset("script style head title noscript template svg math".split())
_WS = re.compile(r"\s+")


def html_to_text(markup: bytes | str) -> tuple[str, str, str, str]:
    """Plain text of an HTML page: ``(text, encoding, title, author)``. Paragraphs are separated
    by blank lines, headings become Markdown-style lines (``## Title``)."""
    from bs4 import BeautifulSoup

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        soup = BeautifulSoup(markup, _parser())
    title_tag = soup.find("title")
    title = _WS.sub(" ", title_tag.get_text()).strip() if title_tag else ""
    meta = soup.find("meta", attrs={"name": re.compile(r"^(author|dc\.creator)$", re.I)})
    content = meta.get("content") if meta else None  # an HTML attribute: absent is None
    author = "" if content is None else str(content).strip()
    paragraphs: list[str] = []
    _collect(soup.body or soup, paragraphs, [])
    encoding = getattr(soup, "original_encoding", None) or "utf-8"
    return "\n\n".join(paragraphs) + "\n", str(encoding), title, author


def _parser() -> str:
    # lxml is faster when installed; the standard library parser is always there
    return "lxml" if importlib.util.find_spec("lxml") is not None else "html.parser"


def _collect(node, paragraphs: list[str], buf: list[str]) -> None:
    """Depth-first walk: inline text gathers in ``buf``; block and heading tags flush it."""
    from bs4 import NavigableString, Tag
    from bs4.element import Comment, Doctype, ProcessingInstruction

    for child in node.children:
        if isinstance(child, (Comment, Doctype, ProcessingInstruction)):
            continue
        if isinstance(child, NavigableString):
            buf.append(_WS.sub(" ", str(child)))  # source line breaks are not text breaks
            continue
        if not isinstance(child, Tag):
            continue
        name = (child.name or "").lower()
        if name in _SKIP_TAGS:
            continue
        if name == "br":
            buf.append("\n")
        elif name in _HEADING_TAGS:
            _flush(buf, paragraphs)
            text = _WS.sub(" ", child.get_text(" ")).strip()
            if text:
                paragraphs.append("#" * _HEADING_TAGS[name] + " " + text)
        elif name == "pre":
            _flush(buf, paragraphs)
            text = child.get_text().strip("\n")
            if text.strip():
                paragraphs.append(text)
        elif name in _BLOCK_TAGS:
            _flush(buf, paragraphs)
            _collect(child, paragraphs, buf)
            _flush(buf, paragraphs)
        else:
            _collect(child, paragraphs, buf)


def _flush(buf: list[str], paragraphs: list[str]) -> None:
    if not buf:
        return
    lines = [_WS.sub(" ", line).strip() for line in "".join(buf).split("\n")]
    text = "\n".join(line for line in lines if line)
    buf.clear()
    if text:
        paragraphs.append(text)


def _read_html(path: Path, data: bytes) -> tuple[str, str, str, str]:
    try:
        text, encoding, title, author = html_to_text(data)
    except Exception as exc:  # bs4 raises assorted errors on garbage input
        raise ReadError(f"{path}: cannot parse HTML ({exc})") from exc
    return text, encoding, title, author


def _read_epub(path: Path, data: bytes) -> tuple[str, str, str]:
    import zipfile

    if not zipfile.is_zipfile(path):
        raise ReadError(f"{path}: not an EPUB (not a zip archive)")
    try:
        import ebooklib
        from ebooklib import epub

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            book = epub.read_epub(str(path), options={"ignore_ncx": True})
    except Exception as exc:  # ebooklib raises bare exceptions for broken archives
        raise ReadError(f"{path}: cannot read EPUB ({exc})") from exc
    parts: list[str] = []
    seen: set[str] = set()
    ids = [entry[0] if isinstance(entry, (tuple, list)) else entry for entry in book.spine]
    items = [book.get_item_with_id(i) for i in ids]
    # Documents missing from the spine still hold text; append them after the spine order.
    items += [it for it in book.get_items_of_type(ebooklib.ITEM_DOCUMENT) if it not in items]
    for item in items:
        if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT:
            continue
        if item.get_id() in seen or isinstance(item, epub.EpubNav):
            continue
        seen.add(item.get_id())
        text = html_to_text(item.get_content())[0].strip()
        if text:
            parts.append(text)
    title = _epub_meta(book, "title")
    author = _epub_meta(book, "creator")
    return "\n\n".join(parts) + "\n", title, author


def _epub_meta(book, name: str) -> str:
    try:
        values = book.get_metadata("DC", name)
    except Exception:  # metadata is optional; a malformed entry must not sink the book
        return ""
    return str(values[0][0]).strip() if values else ""
