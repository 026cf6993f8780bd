"""The prompt, feedback and preprocess groups reach the code as schema objects; what the code once
hashed from their dicts (run and stage fingerprints) must come back unchanged from the objects."""

from __future__ import annotations

import pytest

from litseg.chunkers.groups import PromptConfig, SinglePassPrompt, StagedPrompt, WriterPrompt
from litseg.testing.configs import feedback_config, group_yaml, preprocess_config, prompt_config
from litseg.utils.config import section_dict
from tests.conftest import REPO

PROMPTS = sorted(p.stem for p in (REPO / "conf" / "prompt").glob("*.yaml"))


@pytest.mark.parametrize("name", PROMPTS)
def test_a_typed_prompt_gives_back_the_yaml_it_was_read_from(name: str) -> None:
    prompt = prompt_config(name)
    assert isinstance(prompt, PromptConfig)
    assert section_dict(prompt) == group_yaml("prompt", name)


def test_each_prompt_shape_is_its_class() -> None:
    assert isinstance(prompt_config("litseg_lite"), SinglePassPrompt)
    assert isinstance(prompt_config("litseg"), StagedPrompt)
    assert isinstance(prompt_config("tagger_writer"), WriterPrompt)


@pytest.mark.parametrize("name", ["default", "auto"])
def test_preprocess_and_feedback_give_back_their_yaml(name: str) -> None:
    assert section_dict(preprocess_config(name)) == group_yaml("preprocess", name)
    assert section_dict(feedback_config()) == group_yaml("feedback", "default")


def test_a_field_left_at_its_code_default_is_left_out() -> None:
    # paragraph_breaks defaults to false; a prompt that does not write it hashed without it.
    lite = prompt_config("litseg_lite")
    assert lite.paragraph_breaks is False and "paragraph_breaks" not in section_dict(lite)
