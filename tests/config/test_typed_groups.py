"""The prompt, feedback and preprocess groups reach the code as schema objects; what the code once
hashed from their dicts (run and stage fingerprints) must come back unchanged from the objects."""

from __future__ import annotations

import dataclasses

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
    # What a fingerprint hashes is the section as composed: a field a YAML never writes (a code
    # default) is left out, so adding such a field does not change the hash of a run made before.
    @dataclasses.dataclass
    class Section:
        written: int
        added_later: bool = False

    assert section_dict(Section(written=3)) == {"written": 3}
    assert section_dict(Section(written=3, added_later=True)) == {"written": 3, "added_later": True}


# ------------------------------------------------------------------------------ llm sections
def test_every_llm_section_reaches_the_code_typed() -> None:
    from hydra import compose, initialize_config_dir

    from litseg.annotation.config import LengthReferenceConfig, annotate_config_from
    from litseg.llm.config import EmbeddedLLMConfig, LLMConfig
    from litseg.rag.config import evaluate_config
    from litseg.training.config import train_config_from

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        annotate = annotate_config_from(compose("annotate", overrides=["llm=embedded"]))
        train = train_config_from(compose("train"))
        evaluate = evaluate_config(compose("evaluate", overrides=["suite=smoke", "llm=embedded"]))
    assert isinstance(annotate.llm, EmbeddedLLMConfig) and isinstance(annotate.length_reference, LengthReferenceConfig)
    assert isinstance(train.judge_llm, LLMConfig)
    assert isinstance(evaluate.llm, EmbeddedLLMConfig)
    assert isinstance(evaluate.generation.llm, LLMConfig) and isinstance(evaluate.judge.llm, LLMConfig)


def test_a_backend_taking_keywords_keeps_its_settings_as_given() -> None:
    from litseg.llm.config import LLMConfig, PluginLLMConfig
    from litseg.llm.factory import llm_config_from
    from litseg.utils.config import from_dict

    typed = llm_config_from({"backend": "tests.training_helpers:make_dying_judge", "good_batches": 2,
                             "context_window": 512})
    assert isinstance(typed, PluginLLMConfig) and typed.settings() == {"good_batches": 2}
    assert typed.context_window == 512 and typed.cache is None  # left out in code: no cache
    assert from_dict(LLMConfig, typed) is typed  # an object typed once is not read again
