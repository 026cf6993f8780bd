"""Every chapter is content: the structure rules for chapters titled with a word of front
matter, numbered sections inside chapters, a book's own title line over its chapters and letters
whose heading runs into their first lines (all on invented texts)."""

from __future__ import annotations

from litseg.segmentation.types import Document
from litseg.segmentation.units import find_units
from tests.segmentation.test_structure import PG_FOOT, PG_HEAD, book, prose

ROMAN = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII"]


def units_of(text: str, max_words: int = 10**6) -> tuple[Document, list]:
    doc = Document(book_id="t", text=text)
    return doc, find_units(doc, max_words=max_words, index_matter=False, keep_front_matter=False)


def reasons(doc: Document) -> list[str]:
    return [m.reason for m in doc.matter]


# ------------------------------------------------ (a) a chapter titled Introduction is a chapter
def test_introduction_listed_as_chapter_one_is_the_first_chapter() -> None:
    toc = "CONTENTS\n\nCHAPTER I. Introduction\nCHAPTER II. The Quay at Night\nCHAPTER III. The Storm"
    text = PG_HEAD + book("THE LANTERN KEEPER", toc, "INTRODUCTION", prose(400, 1), "CHAPTER II.\nTHE QUAY AT NIGHT",
                          prose(300, 2), "CHAPTER III.\nTHE STORM", prose(300, 3)) + PG_FOOT
    doc, units = units_of(text)
    assert [(u.kind, u.title) for u in units] == [
        ("chapter", "INTRODUCTION"), ("chapter", "CHAPTER II. THE QUAY AT NIGHT"), ("chapter", "CHAPTER III. THE STORM")]
    assert len(doc.text[units[0].start:units[0].end].split()) == 401  # the heading and all its text
    assert "introduction" not in reasons(doc) and "contents" in reasons(doc)


def test_a_heading_in_a_gap_of_the_numbers_takes_the_missing_number() -> None:
    text = PG_HEAD + book("THE LANTERN KEEPER", "CHAPTER I.", prose(200, 1), "CHAPTER II.", prose(200, 2),
                          "A NOTE FROM THE KEEPER", prose(200, 3), "CHAPTER IV.", prose(200, 4)) + PG_FOOT
    _, units = units_of(text)
    assert [u.title for u in units] == ["CHAPTER I.", "CHAPTER II.", "A NOTE FROM THE KEEPER", "CHAPTER IV."]


def test_a_chapter_subtitled_with_a_word_of_front_matter_keeps_its_heading() -> None:
    text = PG_HEAD + book("THE LANTERN KEEPER", "CHAPTER I.", "INTRODUCTORY", prose(300, 1), "CHAPTER II.",
                          "THE QUAY", prose(300, 2), "CHAPTER III.", "THE STORM", prose(300, 3)) + PG_FOOT
    doc, units = units_of(text)
    assert [u.title for u in units] == ["CHAPTER I. INTRODUCTORY", "CHAPTER II. THE QUAY", "CHAPTER III. THE STORM"]
    assert reasons(doc) == ["credits", "title page"]


def test_a_numbered_contents_entry_is_a_work_whatever_its_word() -> None:
    titles = ["Introduction", "The Quay at Night", "The Storm", "Morning"]
    toc = "CONTENTS\n\n" + "\n".join(f"{ROMAN[i]}. {t}" for i, t in enumerate(titles))
    text = PG_HEAD + book("THE LANTERN KEEPER", toc, *[f"\n\n{t.upper()}\n\n{prose(250, i)}" for i, t in enumerate(titles)])
    doc, units = units_of(text + PG_FOOT)
    assert [u.title for u in units] == [t.upper() for t in titles]
    # listed without numbers, the same heading opens an introduction: front matter
    toc = "CONTENTS\n\n" + "\n".join(titles)
    text = PG_HEAD + book("THE LANTERN KEEPER", toc, *[f"\n\n{t.upper()}\n\n{prose(250, i)}" for i, t in enumerate(titles)])
    doc, units = units_of(text + PG_FOOT)
    assert [u.title for u in units] == [t.upper() for t in titles[1:]] and "introduction" in reasons(doc)
    # an index numbered in the list is still an index: never a unit
    toc = "CONTENTS\n\n" + "\n".join(f"{ROMAN[i]}. {t}" for i, t in enumerate(titles + ["Index"]))
    text = PG_HEAD + book("THE LANTERN KEEPER", toc, *[f"\n\n{t.upper()}\n\n{prose(250, i)}" for i, t in enumerate(titles)],
                          "\n\nINDEX\n\nFog, the, 12\nTower, the, 3")
    doc, units = units_of(text + PG_FOOT)
    assert [u.title for u in units] == [t.upper() for t in titles] and reasons(doc)[-1] == "index"


def test_an_introduction_before_chapter_one_is_still_front_matter() -> None:
    text = PG_HEAD + book("THE LANTERN KEEPER", "INTRODUCTION", prose(300, 1), "CHAPTER I.", prose(300, 2),
                          "CHAPTER II.", prose(300, 3)) + PG_FOOT
    doc, units = units_of(text)
    assert [u.title for u in units] == ["CHAPTER I.", "CHAPTER II."] and "introduction" in reasons(doc)


# ------------------------------------------------------- (c) numbered sections inside chapters
def _chapters_with_sections(section, n_chapters: int = 5, n_sections: int = 4) -> str:
    parts = []
    count = 0
    for i in range(1, n_chapters + 1):
        parts += [f"CHAPTER {ROMAN[i - 1]}.", f"THE {['QUAY', 'NET', 'BELL', 'FOG', 'TIDE'][i - 1]}"]
        for k in range(1, n_sections + 1):
            count += 1
            parts += [section(k, count), prose(120, 10 * i + k)]
    return PG_HEAD + book("HARBOUR DAYS", *parts) + PG_FOOT


def test_sections_restarting_in_each_chapter_stay_inside_it() -> None:
    doc, units = units_of(_chapters_with_sections(lambda k, n: f"SECTION {k}."))
    assert [u.title for u in units] == ["CHAPTER I. THE QUAY", "CHAPTER II. THE NET", "CHAPTER III. THE BELL",
                                        "CHAPTER IV. THE FOG", "CHAPTER V. THE TIDE"]
    assert all(u.kind == "chapter" for u in units)
    assert all(doc.text[u.start:u.end].count("SECTION ") == 4 for u in units)


def test_sections_numbered_through_the_book_stay_inside_their_chapters() -> None:
    _, units = units_of(_chapters_with_sections(lambda k, n: f"SECTION {n}."))
    assert len(units) == 5 and all(u.kind == "chapter" for u in units)


def test_an_overlong_chapter_is_cut_at_its_sections_with_the_chapter_in_the_path() -> None:
    doc, units = units_of(_chapters_with_sections(lambda k, n: f"SECTION {k}.", n_chapters=2), max_words=300)
    # two sections (about 125 words each) to a piece, each piece titled after its first section
    assert [(u.path, u.title) for u in units] == [
        (["CHAPTER I. THE QUAY"], "SECTION 1."), (["CHAPTER I. THE QUAY"], "SECTION 3."),
        (["CHAPTER II. THE NET"], "SECTION 1."), (["CHAPTER II. THE NET"], "SECTION 3.")]
    assert doc.text[units[2].start:].startswith("CHAPTER II.")


# --------------------------------------------------- (d) the book's title line names no story
def test_the_books_title_line_over_its_chapters_is_not_a_story() -> None:
    head = PG_HEAD.replace("Harbour Tales", "The Lantern Keeper").replace("HARBOUR TALES", "THE LANTERN KEEPER")
    chapters = [f"{ROMAN[i]}.\n\n{prose(200, i)}" for i in range(4)]
    text = head + book("THE LANTERN KEEPER", "BY A. NOBODY", "\n\nTHE LANTERN KEEPER\n\n", *chapters,
                       "\n\nTHE DROWNED BELL\n\n", prose(300, 9)) + PG_FOOT
    for title in ("", "The Lantern Keeper"):  # from the header, or given by the reader
        doc = Document(book_id="t", text=text, title=title, author="A. Nobody" if title else "")
        units = find_units(doc, max_words=10**6, index_matter=False, keep_front_matter=False)
        assert [u.title for u in units] == ["I.", "II.", "III.", "IV."]
        assert all(u.path == [] for u in units)
        assert doc.text[doc.matter[-1].start:doc.matter[-1].end].count("THE LANTERN KEEPER") == 2


# ------------------------------------------------------------- (e) every letter of a novel in letters
def test_letters_whose_heading_runs_into_the_date_and_greeting_are_all_found() -> None:
    names = ("ANNA", "CLARA")
    parts = []
    for i in range(1, 13):
        a, b = names[i % 2], names[(i + 1) % 2]
        if i % 2:
            parts.append(f"LETTER {ROMAN[i - 1]}.\nFrom {a.title()} to {b.title()}.\n\n{prose(200, i)}")
        else:  # the heading glued to the place, the date and the greeting
            parts.append(f"LETTER {ROMAN[i - 1]}. FROM {a} TO {b}\nHarbour House, May {i}.\nDear {b.title()},\n"
                         + prose(200, i))
    _, units = units_of(PG_HEAD + book("LETTERS FROM THE QUAY", *parts) + PG_FOOT)
    assert [u.kind for u in units] == ["letter"] * 12
    assert [u.title.split(".")[0] for u in units] == [f"LETTER {r}" for r in ROMAN]


def test_a_capitalised_heading_word_inside_a_list_is_not_a_letter() -> None:
    plates = "ILLUSTRATIONS\n\n" + "\n".join(f"LETTER {r}. THE SEAL OF THE KEEPER" for r in ROMAN[:5])
    text = PG_HEAD + book("LETTERS FROM THE QUAY", plates, *[f"LETTER {r}.\n\n{prose(200, i)}" for i, r in enumerate(ROMAN[:3])])
    doc, units = units_of(text + PG_FOOT)
    assert [u.title for u in units] == ["LETTER I.", "LETTER II.", "LETTER III."] and "illustrations" in reasons(doc)
