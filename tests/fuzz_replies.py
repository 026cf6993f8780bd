"""A fast generator of adversarial model replies for the zero-loss property tests.

``fuzz_reply(rng, n)`` returns the text a model might send for a unit of ``n`` sentences, from
a plausible answer to garbage, drawn with ``rng`` (a ``random.Random``; the property tests seed
it from hypothesis, so a failing example names its seed). It covers what the outside fuzz of issue 12 used and
more: indices that are booleans, objects, lists, NaN, infinities, floats, strings, ranges and
over-long integers; ``segments`` that is not a list; entries that are not objects; alias and
duplicate keys; several JSON objects; ``\\u`` escapes including lone surrogates, NUL and escape
pairs cut in half; deep nesting; unquoted keys with negative values; echoed sentence numbers;
fences, ``<think>`` blocks, prose, truncation, single quotes and trailing commas.

It is plain Python (a few dozen microseconds a reply), so a CI run can push thousands of replies
through the reply path. ``make_fuzz_model`` serves the same replies as a chat backend
(``llm.backend: tests.fuzz_replies:make_fuzz_model``) for runs through the chunkers and
``run_annotate``.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from typing import Any

HUGE = "9" * 4400  # past Python's 4,300-digit conversion limit
ESCAPES = ["\\ud83d", "\\ud83d\\ude00", "\\ud83d\\ude0", "\\udc00", "\\u0000", "\\u001b", "\\uffff",
           "\\x41", "\\q", "\\", "\\u12", "\\ud800\\ud800"]
_ALIASES = {"from_idx": ["from", "start", "start_idx", "begin", "From_Idx"],
            "to_idx": ["to", "end", "end_idx", "to-idx"],
            "context_idx": ["context", "context_ids", "contextIdx"],
            "subtitle": ["title", "name", "sub title"]}
_NUMBERED = re.compile(r"(?m)^\[(\d+)\] ")


def _index(rng: random.Random, n: int) -> Any:
    k = rng.randint(-3, n + 3)
    roll = rng.random()
    if roll < 0.55:
        return k
    return rng.choice([
        str(k), float(k), f"[{k}]", f" {k} ", True, False, None, {"idx": k}, [k], [k, k + 1],
        float("nan"), float("inf"), -float("inf"), k + 0.5, "x", "", f"{k}-{k + 2}", "@@HUGE@@",
        -(10 ** 30), 10 ** 19, "<first index>",
    ])


def _context(rng: random.Random, n: int) -> Any:
    roll = rng.random()
    if roll < 0.5:
        return [rng.randint(1, max(1, n)) for _ in range(rng.randint(0, 3))]
    return rng.choice([
        None, True, {"a": 1}, rng.randint(-2, n + 2), "",
        [_index(rng, n) for _ in range(rng.randint(1, 5))],
        ", ".join(str(rng.randint(-1, n + 2)) for _ in range(rng.randint(1, 4))),
        f"{rng.randint(-2, n)}-{rng.randint(-2, n + 50)}", "1-9999 1-9999", f"1-{HUGE}", "@@HUGE@@",
        [[1, 2], [3]], ["1-3", "x", None], f"{rng.randint(1, n)} to {n}",
    ])


def _segment(rng: random.Random, n: int, a: int | None = None, b: int | None = None) -> dict[str, Any]:
    seg: dict[str, Any] = {}
    if rng.random() < 0.9:
        seg["subtitle"] = rng.choice(["storm", "", "caf\u00e9 \u00e0 minuit", "@@ESC@@", "x@@ESC@@y", 7, None,
                                      ["a", "b"], "\u202etl"])
    seg["from_idx"] = a if a is not None and rng.random() < 0.85 else _index(rng, n)
    seg["to_idx"] = b if b is not None and rng.random() < 0.85 else _index(rng, n)
    if rng.random() < 0.7:
        seg["context_idx"] = _context(rng, n)
    if rng.random() < 0.08:
        del seg["from_idx"]
    if rng.random() < 0.1:
        seg[rng.choice(["confidence", "notes", "idx", "reason"])] = rng.choice([0.9, "x", [1], {"k": 2}])
    if rng.random() < 0.1:  # an alias instead of (or beside) the real name
        key = rng.choice(list(_ALIASES))
        if key in seg:
            alias = rng.choice(_ALIASES[key])
            if rng.random() < 0.5:
                seg[alias] = seg.pop(key)
            else:
                seg[alias] = _index(rng, n) if key != "subtitle" else "other"
    return seg


def _segments(rng: random.Random, n: int) -> Any:
    roll = rng.random()
    if roll < 0.55:  # a near-partition, perturbed
        cuts = sorted(rng.sample(range(2, n + 1), k=min(n - 1, rng.randint(0, 6)))) if n > 1 else []
        starts = [1, *cuts]
        out = []
        for i, a in enumerate(starts):
            b = starts[i + 1] - 1 if i + 1 < len(starts) else n
            if rng.random() < 0.25:
                a += rng.choice([-1, 1, 2])
                b += rng.choice([-1, 1, 3])
            out.append(_segment(rng, n, a, b))
        if rng.random() < 0.1:
            out += out[: rng.randint(1, len(out))]  # repeated ranges
        if rng.random() < 0.05:  # more distinct ranges than sentences
            out += [{"from_idx": 1, "to_idx": k % n + 1} for k in range(n + 2)]
        return out
    if roll < 0.85:
        return [_segment(rng, n) if rng.random() < 0.85 else rng.choice([3, "seg", None, [1, 2], True, []])
                for _ in range(rng.randint(0, 8))]
    return rng.choice(["segments", 5, None, True, {"from_idx": 1, "to_idx": n}, {}, [[]], "@@HUGE@@"])


def _shape(rng: random.Random, n: int) -> Any:
    segments = _segments(rng, n)
    step3 = {"chapter_title": rng.choice(["t", "@@ESC@@", 3]), "step_3_turning_points":
             rng.choice([[], [{"type": "x", "description": "y"}], ["plain"], None, {"type": 1}]),
             "segments": segments}
    shape = rng.choice(["lite", "lite", "flat", "bare", "stage3", "wrapped", "nested_wrong", "listed"])
    return {
        "lite": {"step1": {"step_1_events": rng.choice(["e", "@@ESC@@", ["a"]])},
                 "step2": {"step_2_threads": "t"}, "step3": step3},
        "flat": {"step_1_events": "e", **step3},
        "bare": segments,
        "stage3": step3,
        "wrapped": {rng.choice(["answer", "result", "json"]): step3},
        "nested_wrong": {"plot": {"inner": step3}},
        "listed": [step3],
    }[shape]


def _nest(rng: random.Random, text: str) -> str:
    depth = rng.choice([10, 200, 1500, 3000])
    if rng.random() < 0.5:
        return "[" * depth + text + "]" * depth
    return '{"a": ' * depth + text + "}" * (depth if rng.random() < 0.7 else depth // 2)


def _damage(rng: random.Random, text: str) -> str:
    roll = rng.random()
    if roll < 0.08:
        text = text.replace('"', "'")
    elif roll < 0.14:
        text = text.replace("]", ",]", 1).replace("}", ",}", 1)
    elif roll < 0.22:
        text = re.sub(r'"(from_idx|to_idx|context_idx|subtitle|segments|step3)":', r"\1:", text)
        text = text.replace(": ", ":")
    elif roll < 0.3:
        text = text[: rng.randint(len(text) // 3, len(text))]  # cut at the token limit
    elif roll < 0.34:
        key = rng.choice(["from_idx", "to_idx", "subtitle"])
        text = text.replace(f'"{key}": ', f'"{key}": {rng.randint(-2, 9)}, "{key}": ', 1)  # duplicate key
    elif roll < 0.37:
        text = _nest(rng, text)
    return text


def fuzz_reply(rng: random.Random, n: int) -> str:
    """One adversarial reply for a unit of ``n`` sentences."""
    roll = rng.random()
    if roll < 0.04:
        return rng.choice(["", "   ", "I cannot help with that.", "null", "42", "[1] [2] [3]", "{}", "[]",
                           "{" * rng.randint(1, 4000), "[" * rng.randint(1, 4000), "<think>" * 300,
                           '{"a": ' * 500, "{a b} " * 200, "```json\n", "\ud83d", "\x00" * 10])
    text = json.dumps(_shape(rng, n), ensure_ascii=rng.random() < 0.5)
    text = text.replace('"@@HUGE@@"', HUGE)
    while "@@ESC@@" in text:
        text = text.replace("@@ESC@@", rng.choice(ESCAPES), 1)
    text = _damage(rng, text)
    if rng.random() < 0.1:  # several JSON values
        other = json.dumps(_shape(rng, n))
        text = rng.choice([f"{other}\n{text}", f"{text} {other}", f"{text}{text}"])
    wrapper = rng.choice(["{}", "{}", "{}", "```json\n{}\n```", "Here it is: {} Done.", "<think>{}</think>{}",
                          "<think>unclosed {}", "{}\n```", "ECHO{}", "[{}]"])
    if wrapper == "ECHO{}":
        echo = " ".join(f"[{k}] Sentence {k}." for k in range(1, rng.randint(2, 90)))
        return f"{echo}\n{text}"
    return wrapper.replace("{}", text)


def request_seed(messages: list[dict[str, str]], seed: int) -> int:
    digest = hashlib.sha256(json.dumps([seed, messages], ensure_ascii=True).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def make_fuzz_model(*, seed: int = 0, stage_garbage: float = 0.3, name: str = "fuzz", **_ignored: Any) -> Any:
    """``llm.backend: tests.fuzz_replies:make_fuzz_model``: answers every request with a fuzz
    reply drawn from the request itself (so the same request always gets the same reply, as a
    response cache expects). Summary stages of the teacher get a plausible summary or, with
    probability ``stage_garbage``, a fuzz reply too."""
    from litseg.llm.testing import ScriptedChatModel

    def answer(request: Any) -> str:
        messages = request.messages
        rng = random.Random(request_seed(messages, seed))
        first_user = next(m["content"] for m in messages if m["role"] == "user")
        found = _NUMBERED.findall(first_user)
        n = max((int(i) for i in found), default=1)
        if "carry out step 1 only" in first_user and rng.random() > stage_garbage:
            return json.dumps({"step_1_events": rng.choice(["events", "\ud83d", "a\x00b"])})
        if "carry out step 2 only" in first_user and rng.random() > stage_garbage:
            return json.dumps({"step_2_threads": "threads"})
        return fuzz_reply(rng, n)

    return ScriptedChatModel(answer, name=f"{name}-{seed}")
