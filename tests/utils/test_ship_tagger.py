"""Shipping a tagger: from a folder that holds none it stops with one line and exit code 2 (the
entries' rule for a setup mistake) and leaves the package's models alone; boundary nets retrained
alone ship with the writer of a training run or of the shipped folder they replace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from litseg.errors import SetupError
from litseg.models.ship_tagger import ship
from litseg.run_result import SETUP_EXIT


def test_ship_from_a_run_without_a_tagger_raises_and_writes_nothing(tmp_path: Path) -> None:
    dest_root = tmp_path / "models"
    with pytest.raises(SetupError, match="holds no tagger.json"):
        ship(tmp_path / "run", dest_root=dest_root)
    assert not dest_root.exists()


def test_ship_command_line_says_why_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "litseg.models.ship_tagger", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == SETUP_EXIT
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "holds no tagger.json" in lines[0]


# ------------------------------------------------------------------------------ nets retrained alone
def _boundary_run(run: Path) -> Path:
    """A run of ``stage.run=[boundary]``: nets and their records, no writer."""
    from litseg.testing.tiny_tagger import tiny_tagger_dir

    folder = tiny_tagger_dir(run / "tagger")
    meta = json.loads((folder / "tagger.json").read_text())
    meta.update(validation={"f1": 0.6, "exact_f1": 0.5, "predicted": 10, "reference": 10},
                context={"on": False, "min_precision": 0.5}, writer=None,
                data={"runs": ["teacher"], "split": "teacher-v2", "units": {"train": 3, "test": 1}})
    (folder / "tagger.json").write_text(json.dumps(meta))
    (folder / "training.json").write_text(json.dumps({"threshold": {"rule": "match_count"}}))
    (run / "train_summary.json").write_text(json.dumps({"run_dir": str(run), "stages": {"boundary": {"seconds": 1.0}}}))
    (run / "data_report.json").write_text(json.dumps({"books": {"train": ["a", "b"], "test": ["c"]}}))
    return run


def _shipped_with_writer(dest_root: Path, name: str) -> Path:
    from safetensors.torch import save_file
    import torch

    folder = dest_root / name
    (folder / "writer").mkdir(parents=True)
    (folder / "writer" / "adapter_config.json").write_text(json.dumps({"r": 2}))
    save_file({"lora_A": torch.ones(2, 2)}, str(folder / "writer" / "adapter_model.safetensors"))
    (folder / "tagger.json").write_text(json.dumps({
        "name": name, "writer": {"adapter": "writer", "prompt": "tagger_writer", "prompt_version": "v1"},
        "writer_run": "/runs/train-tagger"}))
    return folder


def test_new_nets_ship_with_the_writer_of_the_folder_they_replace(tmp_path: Path) -> None:
    dest_root = tmp_path / "models"
    _shipped_with_writer(dest_root, "tagger-x")
    shipped = ship(_boundary_run(tmp_path / "run"), "tagger-x", dest_root=dest_root,
                   writer_run=dest_root / "tagger-x")
    meta = json.loads((shipped / "tagger.json").read_text())
    assert (shipped / "writer" / "adapter_model.safetensors").is_file()
    assert (shipped / "boundary.safetensors").is_file()
    assert meta["writer"]["run"] == "/runs/train-tagger" and meta["writer"]["shipped_as"] == "tagger-x"
    card = (shipped / "README.md").read_text()
    assert "carried over from the shipped `tagger-x`" in card and "was not kept" in card
    # shipped again from itself, the writer's record goes on with it
    again = ship(_boundary_run(tmp_path / "run2"), "tagger-x", dest_root=dest_root, writer_run=shipped)
    assert json.loads((again / "tagger.json").read_text())["writer"]["run"] == "/runs/train-tagger"


def test_a_writer_source_without_an_adapter_is_a_setup_error(tmp_path: Path) -> None:
    with pytest.raises(SetupError, match="holds no writer adapter"):
        ship(_boundary_run(tmp_path / "run"), "tagger-x", dest_root=tmp_path / "models", writer_run=tmp_path)
    assert not (tmp_path / "models").exists()


def test_shipped_nets_are_half_size_and_load_as_the_run_saved_them(tmp_path: Path) -> None:
    import torch
    from safetensors.torch import load_file

    from litseg.chunkers.tagger_model import load_nets

    run = _boundary_run(tmp_path / "run")
    _shipped_with_writer(tmp_path / "models", "tagger-x")
    shipped = ship(run, "tagger-x", dest_root=tmp_path / "models", writer_run=tmp_path / "models" / "tagger-x")
    assert all(t.dtype == torch.float16 for t in load_file(str(shipped / "boundary.safetensors")).values())
    meta = json.loads((shipped / "tagger.json").read_text())
    nets = load_nets(shipped, meta["nets"], 384)
    saved = load_file(str(run / "tagger" / "boundary.safetensors"))
    for name, tensor in nets.boundary[0].state_dict().items():
        assert tensor.dtype == torch.float32
        assert torch.allclose(tensor, saved[f"0.{name}"], atol=1e-3, rtol=1e-3)
    assert meta["run_digest"] == "tiny" and meta["digest"] != "tiny"


def test_a_ship_over_the_size_limit_leaves_the_shipped_folder_alone(tmp_path: Path, monkeypatch) -> None:
    import litseg.models.ship_tagger as ship_tagger

    dest_root = tmp_path / "models"
    before = _shipped_with_writer(dest_root, "tagger-x")
    files = sorted(p.relative_to(before) for p in before.rglob("*"))
    monkeypatch.setattr(ship_tagger, "MAX_BYTES", 1000)
    with pytest.raises(SetupError, match="left as it was"):
        ship(_boundary_run(tmp_path / "run"), "tagger-x", dest_root=dest_root, writer_run=before)
    assert sorted(p.relative_to(before) for p in before.rglob("*")) == files
    assert [p.name for p in dest_root.iterdir()] == ["tagger-x"]  # no staging folder left behind


def test_the_model_card_names_the_lm_readings_the_nets_were_trained_on() -> None:
    from litseg.models.ship_tagger import model_card

    shipped = json.loads((Path(__file__).resolve().parents[2] / "src" / "litseg" / "models"
                          / "litseg-tagger-minilm-smollm2" / "tagger.json").read_text())
    base = {**shipped["nets"], "lm_model": "embedded", "lm_layers": [8, 16, 24], "lm_dim": 1730}
    for key in ("lm_last_layers", "lm_alone"):
        base.pop(key, None)
    meta = {**shipped, "training": {"threshold": {"rule": "match_count"}}}
    first = model_card("t", {**meta, "nets": base}, {}, {})
    both = model_card("t", {**meta, "nets": {**base, "lm_last_layers": [16, 24], "lm_alone": True}}, {}, {})
    assert "mean hidden state at layers [8, 16, 24] and its surprisal;" in first
    assert "last token" not in first and "context gain" not in first
    assert "last token's hidden state at layers [16, 24]" in both and "context gain" in both


def test_the_model_card_says_when_the_lm_features_came_from_a_cache() -> None:
    from litseg.models.ship_tagger import model_card

    shipped = json.loads((Path(__file__).resolve().parents[2] / "src" / "litseg" / "models"
                          / "litseg-tagger-minilm-smollm2" / "tagger.json").read_text())
    meta = {**shipped, "training": {"threshold": {"rule": "match_count"}}}

    def card(features):
        return model_card("t", meta, {"stages": {"boundary": {"seconds": 710.0, "features": features}}}, {})

    cached = card({"lm": {"computed": 0, "cached": 815, "seconds": 0.1}})
    assert "710 s (the nets alone: the LM features of all 815 units were read from the stage folder's cache)" in cached
    wider = card({"lm": {"computed": 0, "cached": 815, "seconds": 0.1, "from_wider_cache": 815}})
    assert "all 815 units were taken from the stage folder's cache of the same readings with the context gain" in wider
    read = card({"lm": {"computed": 800, "cached": 15, "seconds": 5252.0}})
    assert "(of which 5,252 s reading 800 units with the LM, 15 more read from the cache)" in read
    assert "the nets alone" not in card(None) and "reading" not in card(None).split("Boundary stage")[1].split(";")[0]


def test_the_command_line_ships_a_model_of_ones_own_outside_the_package(tmp_path: Path) -> None:
    from litseg.models import MODELS_DIR

    before = sorted(p.name for p in MODELS_DIR.iterdir())
    writer = _shipped_with_writer(tmp_path / "shipped", "tagger-x")
    done = subprocess.run([sys.executable, "-m", "litseg.models.ship_tagger", str(_boundary_run(tmp_path / "run")),
                           "--writer-from", str(writer), "--name", "mine", "--dest-root", str(tmp_path / "own")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "own" / "mine" / "tagger.json").is_file() and (tmp_path / "own" / "mine" / "writer").is_dir()
    assert sorted(p.name for p in MODELS_DIR.iterdir()) == before  # the package's models are untouched
