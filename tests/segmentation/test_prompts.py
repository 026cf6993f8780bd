"""The prompt configs under conf/prompt/ and the bundled demo story.

Prompts are plain str.format templates kept in Hydra YAML. These tests render every template,
read back the JSON shape each prompt asks for and compare it with the answer schema it names,
check that each ablation really leaves its part of the workflow out, that the teacher's stages
share one cacheable prefix, that the files compose as a Hydra group, and that no prompt repeats
the paper word for word.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from tests.conftest import REPO, shared_data_dir

PROMPT_DIR = REPO / "conf" / "prompt"
DEMO_STORY = REPO / "src" / "litseg" / "data" / "demo" / "the_two_lanterns.md"

# Single-pass segmentation prompts and the answer schema each one names.
SINGLE_PASS = {
    "litseg_lite": "lite",
    "ablation_no_stage1": "lite_no_step1",
    "ablation_no_stage2": "lite_no_step2",
    "ablation_no_turning_points": "lite_no_turning_points",
    "generic_semantic": "lite_no_theory",
}
ALL_FILES = [*SINGLE_PASS, "litseg", "judge", "feedback"]

# The JSON shape of each answer: dict = object with these keys, [x] = list of x, None = a leaf.
SEGMENT = {"subtitle": None, "from_idx": None, "to_idx": None, "context_idx": None}
TURNING_POINT = {"type": None, "description": None}
STEP1 = {"step_1_events": None}
STEP2 = {"step_2_threads": None}
STEP3 = {"chapter_title": None, "step_3_turning_points": [TURNING_POINT], "segments": [SEGMENT]}
STEP3_NO_TP = {"chapter_title": None, "segments": [SEGMENT]}
SHAPES: dict[str, Any] = {
    "lite": {"step1": STEP1, "step2": STEP2, "step3": STEP3},
    "lite_no_step1": {"step2": STEP2, "step3": STEP3},
    "lite_no_step2": {"step1": STEP1, "step3": STEP3},
    "lite_no_turning_points": {"step1": STEP1, "step2": STEP2, "step3": STEP3_NO_TP},
    "lite_no_theory": {"segments": [SEGMENT]},
    "stage1": STEP1,
    "stage2": STEP2,
    "stage3": STEP3,
}

# Marker phrases of each workflow part: present where the part is kept, absent where ablated.
WORKFLOW_MARKERS = {
    "events": ["stative", "non-events", "narrativity"],
    "threads": ["unity of action", "metadiegetic", "parallel"],
    "turning_points": ["point of no return", "equilibrium", "question and its reply"],
}
KEPT_PARTS = {
    "lite": {"events", "threads", "turning_points"},
    "lite_no_step1": {"threads", "turning_points"},
    "lite_no_step2": {"events", "turning_points"},
    "lite_no_turning_points": {"events", "threads"},
    "lite_no_theory": set(),
}

CHAPTER = "\n".join(f'[{i}] Sentence {i} holds {{braces}} and "quotes".' for i in range(1, 8))
LAST_INDEX = 7
LENGTH_HINT = "Reference only: blocks usually hold {p25}-{p75} sentences (median {p50})."
STEP1_JSON = json.dumps({"step_1_events": "Maren lights the lantern [22]"})
STEP2_JSON = json.dumps({"step_2_threads": "A: harbour; B: boat (intradiegetic)"})
PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")


def prompt_path(name: str):
    # The retry message lives in its own config group (conf/feedback/), the rest in conf/prompt/.
    return REPO / "conf" / "feedback" / "default.yaml" if name == "feedback" else PROMPT_DIR / f"{name}.yaml"


def load(name: str) -> Any:
    return OmegaConf.to_container(OmegaConf.load(prompt_path(name)), resolve=True)


def schema_shape(node: dict[str, Any]) -> Any:
    """The same shape notation, read off the exported JSON Schema."""
    if node.get("type") == "object":
        return {k: schema_shape(v) for k, v in node["properties"].items()}
    if node.get("type") == "array" and node["items"].get("type") == "object":
        return [schema_shape(node["items"])]
    return None


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shapes_match_the_answer_schemas(name: str) -> None:
    # The JSON the prompts ask for is exactly what the parser and constrained decoding expect.
    from litseg.segmentation.schema import get_schema, json_schema

    assert schema_shape(json_schema(get_schema(name))) == SHAPES[name]


def variables(
    chapter: str = CHAPTER, last_index: int = LAST_INDEX, hint: str = ""
) -> dict[str, Any]:
    return {"chapter": chapter, "last_index": last_index, "length_hint": hint,
            "step1_json": STEP1_JSON, "step2_json": STEP2_JSON}


def rendered_hint() -> str:
    return LENGTH_HINT.format(p25=12, p50=25, p75=41)


def trailing_json(text: str) -> Any:
    """The JSON object that ends the text, starting on a line of its own."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"(?m)^\{", text):
        try:
            obj, end = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if not text[end:].strip():
            return obj
    raise AssertionError(f"no JSON object closes the prompt:\n{text[-600:]}")


def shape(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: shape(v) for k, v in obj.items()}
    if isinstance(obj, list):
        assert len(obj) == 1, "a shape example lists exactly one item"
        return [shape(obj[0])]
    return None


def json_keys(tree: Any) -> set[str]:
    if isinstance(tree, dict):
        return set(tree) | {k for v in tree.values() for k in json_keys(v)}
    if isinstance(tree, list):
        return {k for v in tree for k in json_keys(v)}
    return set()


def all_schema_keys() -> set[str]:
    return {k for s in SHAPES.values() for k in json_keys(s)}


@pytest.mark.parametrize("name", ALL_FILES)
def test_file_starts_with_usage_comment_and_names_itself(name: str) -> None:
    text = (prompt_path(name)).read_text(encoding="utf-8")
    first = text.splitlines()[0]
    assert first.startswith("# "), "first line must say how the file is used"
    if name in SINGLE_PASS or name == "litseg":
        assert "python annotate.py" in first and f"prompt={name} " in first
    cfg = load(name)
    assert cfg["name"] == name
    assert isinstance(cfg["version"], str) and cfg["version"]


@pytest.mark.parametrize("name", list(SINGLE_PASS))
def test_single_pass_prompt_renders_and_asks_for_its_schema(name: str) -> None:
    cfg = load(name)
    assert {"name", "version", "system", "user", "schema", "length_hint"} <= set(cfg)
    assert cfg["schema"] == SINGLE_PASS[name]
    assert cfg["length_hint"] == "", "the soft length reference is off unless asked for"
    system = cfg["system"].format(**variables())
    user = cfg["user"].format(**variables())
    for text in (system, user):
        assert not PLACEHOLDER.search(text.replace("{braces}", "")), "unrendered placeholder"
    # The numbered chapter comes first; instructions and the JSON shape follow it.
    assert user.splitlines()[1:1 + LAST_INDEX] == CHAPTER.splitlines()
    asked = trailing_json(user)
    assert shape(asked) == SHAPES[cfg["schema"]]
    assert str(LAST_INDEX) in json.dumps(asked), "the last index is spelled out for the model"
    # Every field of the answer is named, and none that belongs to a dropped part.
    prompt_text = system + "\n" + user
    expected = json_keys(SHAPES[cfg["schema"]])
    for key in expected:
        assert f'"{key}"' in user
    for key in all_schema_keys() - expected:
        assert key not in prompt_text, f"{name} mentions {key!r}, which its schema lacks"


@pytest.mark.parametrize("name", list(SINGLE_PASS))
def test_ablations_keep_exactly_their_workflow_parts(name: str) -> None:
    cfg = load(name)
    text = (cfg["system"] + cfg["user"]).format(**variables()).lower()
    kept = KEPT_PARTS[cfg["schema"]]
    for part, markers in WORKFLOW_MARKERS.items():
        for marker in markers:
            assert (marker in text) == (part in kept), f"{name}: {marker!r} vs kept parts {kept}"
    # The block rules hold for every variant, theory or not.
    for rule in ("100 sentences", "context_idx", "from_idx", "subtitle", "backslash"):
        assert rule in text


@pytest.mark.parametrize("name", [*SINGLE_PASS, "litseg"])
def test_length_hint_renders_between_chapter_and_answer_shape(name: str) -> None:
    cfg = load(name)
    users = [s["user"] for s in cfg["stages"] if "{length_hint}" in s["user"]] if "stages" in cfg \
        else [cfg["user"]]
    assert len(users) == 1, "exactly one message carries the length hint"
    hint = rendered_hint()
    text = users[0].format(**variables(hint=hint))
    assert "12-41 sentences (median 25)" in text
    assert text.index(CHAPTER) < text.index(hint) < text.rindex("\n{")


@pytest.mark.parametrize("name", [*SINGLE_PASS, "litseg"])
def test_system_prompt_is_the_same_for_every_chapter(name: str) -> None:
    """A constant system prompt is what lets the server cache it across chapters."""
    cfg = load(name)
    other = variables(chapter="[1] Something else entirely.", last_index=1, hint=rendered_hint())
    assert cfg["system"].format(**variables()) == cfg["system"].format(**other)


def test_teacher_stages_share_the_system_and_chapter_prefix() -> None:
    cfg = load("litseg")
    assert {"name", "version", "system", "stages", "length_hint"} <= set(cfg)
    stages = cfg["stages"]
    assert [s["name"] for s in stages] == ["stage1", "stage2", "stage3"]
    assert [s["schema"] for s in stages] == ["stage1", "stage2", "stage3"]
    templates = [s["user"] for s in stages]
    # Nothing stage-specific may precede the chapter: the template heads are identical.
    heads = {t.split("{chapter}")[0] for t in templates}
    assert len(heads) == 1 and not PLACEHOLDER.search(heads.pop())
    rendered = [t.format(**variables()) for t in templates]
    prefix = rendered[0][: rendered[0].index(CHAPTER) + len(CHAPTER)]
    assert all(r.startswith(prefix) for r in rendered)
    # Earlier answers arrive after the chapter, in order.
    assert "{step1_json}" not in templates[0] and "{step2_json}" not in templates[1]
    for later, needed in ((1, ["{step1_json}"]), (2, ["{step1_json}", "{step2_json}"])):
        positions = [templates[later].index(p) for p in needed]
        assert templates[later].index("{chapter}") < positions[0] and positions == sorted(positions)
        assert STEP1_JSON in rendered[later]
    assert STEP2_JSON in rendered[2]
    # Stage 3's answer spells out the last index; each stage asks for its own fields.
    assert "{last_index}" in templates[2]
    for stage, text in zip(stages, rendered):
        assert shape(trailing_json(text)) == SHAPES[stage["schema"]]
    system = cfg["system"].format(**variables())
    for markers in WORKFLOW_MARKERS.values():
        for marker in markers:
            assert marker in system.lower(), "the shared system prompt carries the whole workflow"


def test_judge_rubric_renders_with_its_numbers_and_example() -> None:
    cfg = load("judge")
    assert cfg["dimensions"] == ["event_validity", "unity_of_action", "cut_point_logic"]
    scoring = cfg["scoring"]
    assert (scoring["scale_min"], scoring["scale_max"]) == (1, 5)
    assert scoring["front_matter_score"] == 5.0
    assert scoring["context_penalty"] == scoring["context_bonus"] == 0.5
    system = cfg["system"].format(**scoring)
    assert not PLACEHOLDER.search(system)
    for dim in cfg["dimensions"]:
        assert dim in system
    for phrase in ("prologue", "copyright", "inside the chunk's own main range",
                   "subtract 0.5", "add 0.5", "gets 5.0", "from 1 (worst) to\n5 (best)"):
        assert phrase in system
    example = trailing_json(system)
    assert list(example) == cfg["dimensions"]
    assert len({len(scores) for scores in example.values()}) == 1
    chunks = ('Chunk 1 | subtitle: "Fog" | main: 1-4 | context: []\n'
              'Chunk 2 | subtitle: "Anchor" | main: 5-7 | context: [2]')
    user = cfg["user"].format(chapter=CHAPTER, chunks=chunks, num_chunks=2)
    assert user.splitlines()[1:1 + LAST_INDEX] == CHAPTER.splitlines()
    assert chunks in user and "exactly 2 scores" in user
    assert not PLACEHOLDER.search(user.replace("{braces}", ""))


def test_feedback_lists_every_problem() -> None:
    cfg = load("feedback")
    problems = ["segments[2].from_idx 9 > to_idx 8", "sentences 10-12 are not covered by any block"]
    listed = "\n".join(cfg["item"].format(problem=p) for p in problems)
    text = cfg["user"].format(problems=listed, last_index=12, attempt=1, max_attempts=3)
    for p in problems:
        assert f"- {p}" in text
    assert "retry 1 of 3" in text and "to_idx is 12" in text
    assert not PLACEHOLDER.search(text)


def test_every_prompt_composes_as_a_hydra_group(tmp_path: Path) -> None:
    from hydra import compose, initialize_config_dir

    shutil.copytree(PROMPT_DIR, tmp_path / "prompt")
    (tmp_path / "probe.yaml").write_text("defaults:\n  - prompt: litseg_lite\n  - _self_\n")
    with initialize_config_dir(config_dir=str(tmp_path), version_base=None):
        for name in [n for n in ALL_FILES if n != "feedback"]:
            cfg = compose(config_name="probe", overrides=[f"prompt={name}"])
            assert cfg.prompt.name == name
            assert OmegaConf.to_container(cfg.prompt, resolve=True) == load(name)


@pytest.mark.parametrize("name", [*SINGLE_PASS, "litseg"])
def test_prompt_composes_into_annotate_config(name: str) -> None:
    if not (REPO / "conf" / "annotate.yaml").exists():
        pytest.skip("conf/annotate.yaml is not there yet; the group itself is checked above")
    from hydra import compose, initialize_config_dir
    from hydra.errors import MissingConfigException

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        try:
            cfg = compose(config_name="annotate", overrides=[f"prompt={name}"])
        except MissingConfigException as err:
            # Only another group's file may be missing; a missing prompt is this test's failure.
            if err.missing_cfg_file is None or err.missing_cfg_file.startswith("prompt"):
                raise
            pytest.skip(f"conf/annotate.yaml needs {err.missing_cfg_file}, not written yet")
    assert cfg.prompt.name == name


def shingles(text: str, n: int = 10) -> set[str]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}


def test_prompts_and_story_are_in_the_projects_own_words() -> None:
    paper = shared_data_dir().parent / "paper" / "litseg.txt"
    if not paper.is_file():
        pytest.skip(f"{paper} is missing; cannot compare wording with the paper")
    paper_runs = shingles(paper.read_text(encoding="utf-8", errors="replace"))
    files = sorted(PROMPT_DIR.glob("*.yaml")) + [DEMO_STORY, Path(__file__)]
    shared = {f.name: sorted(shingles(f.read_text(encoding="utf-8")) & paper_runs) for f in files}
    assert all(len(runs) < 3 for runs in shared.values()), shared


def test_demo_story_has_three_chapters_of_demo_size() -> None:
    text = DEMO_STORY.read_text(encoding="utf-8")
    assert text.startswith("# The Two Lanterns\n")
    parts = re.split(r"(?m)^## (Chapter \w+: .+)$", text)
    titles, bodies = parts[1::2], parts[2::2]
    assert [t.split(":")[0] for t in titles] == ["Chapter One", "Chapter Two", "Chapter Three"]
    words = [len(b.split()) for b in bodies]
    assert all(550 <= w <= 950 for w in words), words
    assert 1800 <= sum(words) <= 2500
    # Dialogue with speech tags, a marked flashback, and two alternating places.
    assert len(re.findall(r'"[^"]+[,?!]" (?:said|asked) \w+', text)) >= 5
    assert "she remembered" in text and "The memory faded" in text
    scene_openers = re.findall(r"(?m)^(?:In Wrenhaven|On the Kestrel|On the headland)", text)
    assert len(scene_openers) >= 6
