"""Boundary agreement between segmentations and placeholder-subtitle detection."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from litseg.segmentation.agreement import (
    boundary_f1,
    cuts,
    instruction_strings,
    micro_boundary_f1,
    placeholder_share,
    placeholder_subtitle,
    repeated_subtitle_share,
)
from litseg.segmentation.schema import get_schema
from litseg.testing.configs import prompt_config


def seg(*ranges: tuple[int, int]) -> list[dict]:
    return [{"subtitle": "x", "from_idx": a, "to_idx": b, "context_idx": []} for a, b in ranges]


def test_cuts_are_block_starts_after_the_first() -> None:
    assert cuts(seg((1, 4), (5, 9), (10, 12))) == [5, 10]
    assert cuts(seg((1, 12))) == []


def test_boundary_f1_with_tolerance() -> None:
    gold = seg((1, 4), (5, 9), (10, 12))
    assert boundary_f1(gold, gold).f1 == 1.0
    near = seg((1, 5), (6, 10), (11, 12))  # every cut one sentence late
    assert boundary_f1(near, gold, tolerance=1).f1 == 1.0
    assert boundary_f1(near, gold, tolerance=0).f1 == 0.0
    extra = seg((1, 2), (3, 4), (5, 9), (10, 12))  # one spurious cut: precision 2/3, recall 1
    s = boundary_f1(extra, gold)
    assert (s.precision, s.recall, s.matched) == (2 / 3, 1.0, 2)
    assert s.f1 == 0.8


def test_one_cut_matches_one_reference_cut_only() -> None:
    gold = seg((1, 5), (6, 12))
    pred = seg((1, 4), (5, 5), (6, 6), (7, 12))  # cuts 5, 6, 7 all within 1 of 6
    s = boundary_f1(pred, gold)
    assert s.matched == 1 and s.predicted == 3 and s.reference == 1


def test_no_cuts_on_either_side_agree_and_one_sided_scores_zero() -> None:
    assert boundary_f1(seg((1, 9)), seg((1, 9))).f1 == 1.0
    assert boundary_f1(seg((1, 9)), seg((1, 4), (5, 9))).f1 == 0.0


def test_micro_pools_units() -> None:
    pairs = [(seg((1, 4), (5, 9)), seg((1, 4), (5, 9))), (seg((1, 9)), seg((1, 2), (3, 9)))]
    s = micro_boundary_f1(pairs)
    assert (s.matched, s.predicted, s.reference) == (1, 1, 2)


@given(st.lists(st.integers(2, 60), unique=True, max_size=8), st.lists(st.integers(2, 60), unique=True, max_size=8))
def test_f1_is_symmetric_and_bounded(a: list[int], b: list[int]) -> None:
    def blocks(starts: list[int]) -> list[dict]:
        s = [1, *sorted(starts)]
        return seg(*[(x, (s[i + 1] - 1) if i + 1 < len(s) else 60) for i, x in enumerate(s)])

    ab, ba = boundary_f1(blocks(a), blocks(b)), boundary_f1(blocks(b), blocks(a))
    assert 0.0 <= ab.f1 <= 1.0 and abs(ab.f1 - ba.f1) < 1e-12


def test_placeholder_subtitles_are_the_instructions_copied() -> None:
    prompt = prompt_config("litseg_lite")
    texts = instruction_strings([prompt.user, prompt.system], [get_schema("lite")])
    assert placeholder_subtitle("short name of the block's core action", texts)
    assert placeholder_subtitle("Short name of the block", texts)  # a part of one, case ignored
    assert placeholder_subtitle("", texts)
    assert placeholder_subtitle("Short title of the plot block.", texts)  # a schema description
    assert not placeholder_subtitle("Mara lights the lantern on the cliff", texts)
    assert not placeholder_subtitle("The block", texts)  # too short to call a copy
    assert placeholder_share(["Mara lights the lantern", "short name of the block's core action"], texts) == 0.5
    assert placeholder_share([], texts) is None


def test_boundary_reward_scores_agreement_with_the_teacher() -> None:
    import json

    from litseg.training.rewards import RewardContext, build_reward

    reward = build_reward("boundary", "boundary", {"tolerance": 1}, RewardContext())
    ref = json.dumps({"chapter_title": "t", "segments": seg((1, 4), (5, 9), (10, 12))})
    same = [{"role": "assistant", "content": ref}]
    near = json.dumps({"chapter_title": "t", "segments": seg((1, 5), (6, 12))})
    scores = reward([same, near, "not json at all"], reference=[ref] * 3, schema=["segments"] * 3)
    assert scores[0] == 1.0
    assert scores[1] == boundary_f1(seg((1, 5), (6, 12)), seg((1, 4), (5, 9), (10, 12))).f1 == 2 / 3
    assert scores[2] == 0.0


def test_repeated_subtitles_count_within_a_unit_only():
    units = [["Mara finds the key", "mara  finds the KEY", "Mara opens the door"], ["Mara finds the key"]]
    assert repeated_subtitle_share(units) == 1 / 4
    assert repeated_subtitle_share([]) is None
