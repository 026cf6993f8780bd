"""Heading numbers: Roman numerals, number words and ordinals (``XIV``, ``fourteen``, ``the
Fourteenth``, ``the last``).
"""

from __future__ import annotations

import re


_UNITS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
_TEENS = ["ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
          "eighteen", "nineteen"]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_ORD_UNITS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth"]
_ORD_TEENS = ["tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth",
              "sixteenth", "seventeenth", "eighteenth", "nineteenth"]
_ORD_TENS = ["twentieth", "thirtieth", "fortieth", "fiftieth", "sixtieth", "seventieth",
             "eightieth", "ninetieth"]
WORD_NUMBERS: dict[str, int] = {}
ORDINALS: dict[str, int] = {}
for _i, _w in enumerate(_UNITS, 1):
    WORD_NUMBERS[_w] = _i
for _i, _w in enumerate(_TEENS, 10):
    WORD_NUMBERS[_w] = _i
for _i, _w in enumerate(_ORD_UNITS, 1):
    ORDINALS[_w] = _i
for _i, _w in enumerate(_ORD_TEENS, 10):
    ORDINALS[_w] = _i
for _i, _w in enumerate(_TENS, 2):
    WORD_NUMBERS[_w] = _i * 10
    ORDINALS[_ORD_TENS[_i - 2]] = _i * 10
    for _j, _u in enumerate(_UNITS, 1):
        WORD_NUMBERS[f"{_w}-{_u}"] = _i * 10 + _j
        ORDINALS[f"{_w}-{_ORD_UNITS[_j - 1]}"] = _i * 10 + _j
_LAST_WORDS = {"last": None, "final": None}


def _alternation(words) -> str:
    return "|".join(sorted((re.escape(w).replace("\\-", "[- ]") for w in words), key=len,
                           reverse=True))


ORD_ALT = _alternation(list(ORDINALS) + list(_LAST_WORDS))
NUM_ALT = rf"[IVXLCDMivxlcdm]+|\d{{1,4}}|{_alternation(WORD_NUMBERS)}|{ORD_ALT}"
_ROMAN = re.compile(r"M{0,3}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def roman_to_int(s: str) -> int | None:
    """Value of a well-formed Roman numeral (either case), else None."""
    up = s.upper()
    if not up or not _ROMAN.fullmatch(up):
        return None
    values = [_ROMAN_VALUES[c] for c in up]
    total = 0
    for va, vb in zip(values, values[1:] + [0]):  # a numeral subtracts before a larger one
        total += -va if va < vb else va
    return total


def parse_number(token: str) -> int | None | bool:
    """Integer value of a heading number (``"XIV"``, ``"14"``, ``"fourteen"``, ``"the last"``);
    ``None`` for "last"/"final" (no value but valid); ``False`` when it is not a number."""
    t = token.strip().lower().replace(" ", "-")
    if t.startswith("the-"):
        t = t[4:]
    if t.isdigit():
        return int(t)
    if t in WORD_NUMBERS:
        return WORD_NUMBERS[t]
    if t in ORDINALS:
        return ORDINALS[t]
    if t in _LAST_WORDS:
        return None
    raw = re.sub(r"(?i)^the\s+", "", token.strip())
    value = roman_to_int(raw)
    # Lower-case roman numerals are accepted only when small ("Chapter iv"), so that ordinary
    # words made of the letters (mix, dim, ...) never pass.
    if value is not None and (raw.isupper() or value <= 40):
        return value
    return False
