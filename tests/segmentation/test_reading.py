"""Reading books: encodings, line endings, bad input, HTML/EPUB extraction, input specs."""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path

import pytest

from litseg.segmentation.gutenberg import gutenberg_bounds, header_metadata
from litseg.segmentation.preprocess import load_documents
from litseg.segmentation.reading import (
    BOOK_SUFFIXES,
    ReadError,
    ReadFailure,
    html_to_text,
    iter_input_paths,
    read_document,
    scan_inputs,
    slugify,
)
from litseg.segmentation.types import Document

PG_HEADER = (
    "The Project Gutenberg EBook of The Lantern Keeper, by Ada Quill\n\n"
    "This file is free for anyone to share.\n\n"
    "Title: The Lantern Keeper\n\nAuthor: Ada Quill\n\nRelease Date: May 1, 2001\n\n"
    "*** START OF THIS PROJECT GUTENBERG EBOOK THE LANTERN KEEPER ***\n\n\n"
    "Produced by A. Volunteer\n\n\n"
)
PG_FOOTER = (
    "\n\n\nEnd of the Project Gutenberg EBook of The Lantern Keeper, by Ada Quill\n\n"
    "*** END OF THIS PROJECT GUTENBERG EBOOK THE LANTERN KEEPER ***\n\n"
    "The licence text follows here.\n"
)
STORY = (
    "CHAPTER I\n\nThe keeper climbed the tower every evening before the tide turned. "
    "She counted the steps aloud, as her mother had done.\n\n"
    "CHAPTER II\n\nA ship came in the fog. Nobody on the quay had seen its flag before, "
    "and the harbour master sent for the keeper at once.\n"
)


def write(path: Path, data: bytes | str) -> Path:
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


# ----------------------------------------------------------------------------- decoding

def test_utf8_bom_removed_and_crlf_kept(tmp_path: Path) -> None:
    raw = STORY.replace("\n", "\r\n")
    p = write(tmp_path / "bom.txt", b"\xef\xbb\xbf" + raw.encode("utf-8"))
    doc = read_document(p)
    assert doc.text == raw  # BOM gone, every \r\n still there: offsets map to the file
    assert doc.encoding == "utf-8"
    assert doc.warnings == []
    i = doc.text.index("CHAPTER II")
    assert raw.encode("utf-8")[: len(doc.text[:i].encode("utf-8"))].decode() == doc.text[:i]


def test_mixed_and_bare_cr_line_endings_kept(tmp_path: Path) -> None:
    raw = "First line\rsecond line\r\n\r\nThird\n"
    doc = read_document(write(tmp_path / "cr.txt", raw))
    assert doc.text == raw


def test_latin1_detected_with_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    text = ("Le café était fermé, mais la propriétaire, Mme Hélène Duprès, nous fit entrer "
            "par la porte de derrière. « Déjà là ? » dit-elle, étonnée. ") * 20
    p = write(tmp_path / "latin.txt", text.encode("latin-1"))
    with caplog.at_level(logging.WARNING):
        doc = read_document(p)
    assert "Hélène Duprès" in doc.text
    assert doc.encoding.lower() != "utf-8"
    assert doc.warnings and "latin.txt" in doc.warnings[0] and "UTF-8" in doc.warnings[0]
    assert any("decoded as" in r.message for r in caplog.records)


def test_utf16_with_bom(tmp_path: Path) -> None:
    p = write(tmp_path / "wide.txt", STORY.encode("utf-16"))
    doc = read_document(p)
    assert doc.text == STORY
    assert doc.encoding == "utf-16"


@pytest.mark.parametrize("data", [b"", b"   \n\r\n\t  "])
def test_empty_input_raises_naming_the_file(tmp_path: Path, data: bytes) -> None:
    p = write(tmp_path / "nothing.txt", data)
    with pytest.raises(ReadError, match=r"nothing\.txt.*empty"):
        read_document(p)


def test_binary_input_raises(tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4
    p = write(tmp_path / "cover.txt", png)
    with pytest.raises(ReadError, match=r"cover\.txt.*binary"):
        read_document(p)


def test_control_character_soup_raises(tmp_path: Path) -> None:
    p = write(tmp_path / "noise.txt", bytes([1, 2, 3, 4, 5, 6, 7, 8, 14, 15, 16]) * 300)
    with pytest.raises(ReadError, match="noise.txt"):
        read_document(p)


def test_missing_file_raises_read_error(tmp_path: Path) -> None:
    with pytest.raises(ReadError, match="absent.txt"):
        read_document(tmp_path / "absent.txt")
    assert issubclass(ReadError, ValueError)


# ----------------------------------------------------------------------------- metadata, ids

def test_book_id_and_gutenberg_metadata(tmp_path: Path) -> None:
    p = write(tmp_path / "1342_The Lantern-Keeper.txt", PG_HEADER + STORY + PG_FOOTER)
    doc = read_document(p)
    assert doc.book_id == "1342-the-lantern-keeper"
    assert (doc.title, doc.author) == ("The Lantern Keeper", "Ada Quill")
    assert doc.source_path == str(p)
    assert read_document(p, book_id="lk").book_id == "lk"


def test_slugify_handles_accents_and_empties() -> None:
    assert slugify("Über Straße_№5") == "uber-strasse-no5"
    assert slugify("___") == "book"


def test_markdown_title_from_first_heading(tmp_path: Path) -> None:
    doc = read_document(write(tmp_path / "play.md", "# The Squall\n\n## ACT I\n\nText here.\n"))
    assert doc.title == "The Squall"


def test_old_style_header_title() -> None:
    text = ("***The Project Gutenberg Etext of The Lantern Keeper***\n\n"
            "*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*\n\nEvening...\n")
    assert header_metadata(text) == ("The Lantern Keeper", "")


# ----------------------------------------------------------------------------- Gutenberg markers

@pytest.mark.parametrize(
    "header,footer",
    [
        ("*** START OF THIS PROJECT GUTENBERG EBOOK X ***\n",
         "*** END OF THIS PROJECT GUTENBERG EBOOK X ***\nlicence"),
        ("***START OF THE PROJECT GUTENBERG EBOOK X***\n",
         "***END OF THE PROJECT GUTENBERG EBOOK X***\nlicence"),
        ("*** START OF THIS PROJECT GUTENBERG EBOOK\nTHE LONG TITLE ***\n",
         "End of Project Gutenberg's X, by Y\nlicence"),
        ("*** START OF THE COPYRIGHTED PROJECT GUTENBERG EBOOK X ***\n",
         "*** START: FULL LICENSE ***\nlicence"),
        ("*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*\n",
         "End of the Project Gutenberg Etext of X\nlicence"),
    ],
)
def test_gutenberg_marker_variants(header: str, footer: str) -> None:
    preamble = "Project Gutenberg preamble and licence text. " * 5 + "\n"
    body = "CHAPTER I\n\nThe body of the book, long enough to be the middle. " * 20
    text = preamble + header + "\nThis etext was prepared by a volunteer.\n\n" + body + "\n\n" + footer
    s, e = gutenberg_bounds(text)
    assert text[s:e] == body.strip()


def test_text_without_markers_keeps_everything() -> None:
    text = "\n\n  Just a story.\n\nWith two paragraphs.  \n"
    s, e = gutenberg_bounds(text)
    assert text[s:e] == "Just a story.\n\nWith two paragraphs."


# ----------------------------------------------------------------------------- HTML and EPUB

HTML = """<html><head><title>The Lantern Keeper</title>
<meta name="author" content="Ada Quill"><style>p {color: red}</style>
<script>var x = "not text";</script></head>
<body><h1>The Lantern Keeper</h1>
<h2>Chapter I</h2>
<p>The keeper   climbed
the tower.</p><p>She counted<br/>the steps.</p>
<div><h2>Chapter II</h2><p>A ship came in the <i>fog</i>.</p></div>
</body></html>"""


def test_html_to_text_paragraphs_and_headings() -> None:
    text, _, title, author = html_to_text(HTML)
    assert (title, author) == ("The Lantern Keeper", "Ada Quill")
    assert text == ("# The Lantern Keeper\n\n## Chapter I\n\nThe keeper climbed the tower.\n\n"
                    "She counted\nthe steps.\n\n## Chapter II\n\nA ship came in the fog.\n")
    assert "not text" not in text and "color" not in text


def test_read_html_file(tmp_path: Path) -> None:
    doc = read_document(write(tmp_path / "keeper.html", HTML))
    assert doc.title == "The Lantern Keeper" and doc.author == "Ada Quill"
    assert "## Chapter II" in doc.text


def make_epub(path: Path) -> Path:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("lantern-1")
    book.set_title("The Lantern Keeper")
    book.add_author("Ada Quill")
    chapters = []
    for i, body in enumerate(["The keeper climbed the tower.", "A ship came in the fog."], 1):
        ch = epub.EpubHtml(title=f"Chapter {i}", file_name=f"ch{i}.xhtml", lang="en")
        ch.content = f"<h1>Chapter {i}</h1><p>{body}</p><p>Second paragraph {i}.</p>"
        book.add_item(ch)
        chapters.append(ch)
    book.toc = chapters
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *chapters]
    epub.write_epub(str(path), book)
    return path


def test_read_epub_in_spine_order(tmp_path: Path) -> None:
    doc = read_document(make_epub(tmp_path / "keeper.epub"))
    assert (doc.title, doc.author, doc.encoding) == ("The Lantern Keeper", "Ada Quill", "epub")
    one, two = doc.text.index("# Chapter 1"), doc.text.index("# Chapter 2")
    assert one < doc.text.index("The keeper climbed the tower.") < two
    assert "\n\nSecond paragraph 1.\n\n" in doc.text


def test_broken_epub_raises(tmp_path: Path) -> None:
    p = write(tmp_path / "bad.epub", b"this is not a zip archive at all")
    with pytest.raises(ReadError, match=r"bad\.epub.*not an EPUB"):
        read_document(p)
    z = tmp_path / "empty.epub"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("mimetype", "application/epub+zip")
    with pytest.raises(ReadError, match="empty.epub"):
        read_document(z)


# ----------------------------------------------------------------------------- input specs

def test_iter_input_paths_file_dir_glob_sequence(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    a = write(tmp_path / "b.txt", STORY)
    b = write(tmp_path / "a.md", STORY)
    c = write(tmp_path / "sub" / "c.html", HTML)
    write(tmp_path / "notes.csv", "x,y\n")
    assert iter_input_paths(tmp_path) == [b, a, c]
    assert iter_input_paths(str(tmp_path / "*.txt")) == [a]
    assert iter_input_paths(str(tmp_path / "**" / "*.html")) == [c]
    assert iter_input_paths([a, str(a), tmp_path / "sub"]) == [a, c]  # de-duplicated
    assert iter_input_paths(a) == [a]


def test_scan_names_every_file_that_is_not_a_book_and_why(tmp_path: Path) -> None:
    """Unsupported formats are known by their first bytes as well as their name: a PDF whose
    syntax is plain ASCII is a PDF even when passed directly or named .txt."""
    book = write(tmp_path / "book.txt", STORY)
    pdf = write(tmp_path / "paper.pdf", b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n")
    disguised = write(tmp_path / "notes.txt", b"%PDF-1.7\n% plain ASCII all the way\n")
    docx = write(tmp_path / "draft.docx", b"PK\x03\x04" + b"\x00" * 40)
    bare = write(tmp_path / "README", "A plain text file without a suffix is read as text.\n")
    (tmp_path / ".hidden").mkdir()
    write(tmp_path / ".hidden" / "cache.bin", b"\x00\x01")  # hidden: not an input at all
    scan = scan_inputs(tmp_path)
    assert scan.books == [bare, book]
    assert dict(scan.skipped) == {
        docx: "unsupported format (a ZIP archive such as .docx or .odt)",
        disguised: "unsupported format (PDF)", pdf: "unsupported format (PDF)"}
    assert scan_inputs([book, pdf]).skipped == [(pdf, "unsupported format (PDF)")]
    with pytest.raises(FileNotFoundError, match=r"no book to read in .*paper\.pdf: unsupported format \(PDF\)"):
        iter_input_paths(pdf)
    odd = write(tmp_path / "scan.djvu", "text that is not text")
    assert scan_inputs([book, odd.parent / "*.djvu"]).skipped == [(odd, f"unsupported format (.djvu; books are "
                                                                f"{', '.join(BOOK_SUFFIXES)})")]


def test_iter_input_paths_nothing_matches(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no book files match .*nope\*\.txt"):
        iter_input_paths(str(tmp_path / "nope*.txt"))
    with pytest.raises(FileNotFoundError):
        iter_input_paths([])


def test_load_documents_reports_failures_and_continues(tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    write(tmp_path / "a_good.txt", PG_HEADER + STORY + PG_FOOTER)
    write(tmp_path / "b_binary.txt", b"\x00\x01\x02" * 100)
    write(tmp_path / "c_empty.txt", b"")
    write(tmp_path / "d_good.md", "# Play\n\n## ACT I\n\n### SCENE I. A room.\n\nWords are spoken here.\n")
    with caplog.at_level(logging.WARNING):
        results = list(load_documents(tmp_path, max_words=50))
    assert [type(r) for r in results] == [Document, ReadFailure, ReadFailure, Document]
    good, bad = results[0], results[1]
    assert isinstance(good, Document) and [u.title for u in good.units] == ["CHAPTER I", "CHAPTER II"]
    assert isinstance(bad, ReadFailure) and isinstance(bad.error, ReadError)
    assert "b_binary.txt" in str(bad) and "ReadError" in bad.message
    assert sum("skipping" in r.message for r in caplog.records) == 2
