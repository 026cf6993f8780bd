"""docs/extending.md: adding a chunker, a benchmark, a reward or a vector store is one new module plus
one new config file. The page's blocks are written into a copy of the repository (src/litseg,
conf/, the entry scripts), where they must be new files, and run there through the real registries,
the typed config schemas and the page's own commands; nothing in the checkout is touched."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

DOC = REPO / "docs" / "extending.md"
# <!-- file: PATH --> (a plug-in's module or config), <!-- data: PATH --> (example input) or
# <!-- run --> (a command of the page), each right above its fenced block.
BLOCK = re.compile(r"<!-- (?P<role>file|data|run)(?:: (?P<path>[^ ]+))? -->\n```[\w-]*\n(?P<body>.*?)```\n", re.S)
# Each plug-in point: the package its new module goes into and the config group of its new file.
PLUGINS = {
    "chunker": ("src/litseg/chunkers", "conf/method"),
    "benchmark": ("src/litseg/rag/benchmarks", "conf/suite"),
    "reward": ("src/litseg/training/rewards", "conf/rewards"),
    "vector store": ("src/litseg/rag/stores", "conf/retrieval"),
}
STORY = ("The Lantern Keeper\n\n"
         "Mara lit the west lantern every evening before the tide came in. Her brother Tomas kept the east one.\n"
         "  \n"
         "One night a storm put out the east lantern. Mara rowed across the bay with a dry box of matches.\n\n\n"
         "When she reached the tower, Tomas was gone. Only his red scarf hung on the railing.\n")
PARAGRAPHS = [p.strip() for p in re.split(r"\n[ \t]*\n", STORY) if p.strip()]
# Test-only overrides appended to the page's commands: their own run folder, no plots, fewer resamples.
FAST_EVALUATE = ["progress=false", "report.plots=false", "metrics.n_resamples=200"]


def _blocks() -> list[tuple[str, str | None, str]]:
    return [(m["role"], m["path"], m["body"]) for m in BLOCK.finditer(DOC.read_text(encoding="utf-8"))]


def _files() -> dict[str, str]:
    return {path: body for role, path, body in _blocks() if role == "file"}


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository's code and configs with the page's files and data added."""
    root = tmp_path_factory.mktemp("extending")
    (root / "src").mkdir()
    # copy2 keeps modification times, so the compiled caches stay valid and imports stay fast.
    shutil.copytree(REPO / "src" / "litseg", root / "src" / "litseg")
    shutil.copytree(REPO / "conf", root / "conf")
    for entry in ("annotate.py", "evaluate.py", "train.py"):
        shutil.copy2(REPO / entry, root / entry)
    for role, path, body in _blocks():
        if role == "run":
            continue
        target = root / path
        assert not target.exists(), f"docs/extending.md: {path} would replace an existing file"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8")
    (root / "book.txt").write_text(STORY, encoding="utf-8")
    (root / "data" / "my_qa" / "books").mkdir(parents=True, exist_ok=True)
    (root / "data" / "my_qa" / "books" / "lanterns.txt").write_text(STORY, encoding="utf-8")
    return root


def _python(sandbox: Path, args: list[str], timeout: int = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(sandbox / "src"), "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "1",
           "LITSEG_CACHE_DIR": str(sandbox / ".cache")}
    out = subprocess.run([sys.executable, *args], cwd=sandbox, env=env, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, f"{shlex.join(args)}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def _check(sandbox: Path, name: str, code: str) -> str:
    """Run ``code`` in the sandbox (its litseg first on the path); its asserts are the checks (a
    file, so that a failing one shows its line)."""
    script = sandbox / "checks" / f"{name}.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(f"import litseg\nassert litseg.__file__.startswith({str(sandbox)!r})\n{code}", encoding="utf-8")
    return _python(sandbox, [str(script)]).stdout


def _command(prefix: str) -> list[str]:
    """The page's ``run`` commands starting with ``prefix``, as argument lists without ``python``."""
    found = [shlex.split(body.strip()) for role, _, body in _blocks() if role == "run"]
    found = [args[1:] for args in found if args[0] == "python" and args[1] == prefix]
    assert found, f"docs/extending.md shows no `python {prefix} ...` command"
    return found


def test_each_plug_in_is_one_new_module_and_one_config_file() -> None:
    files = sorted(_files())
    for kind, (package, group) in PLUGINS.items():
        modules = [f for f in files if Path(f).parent == Path(package) and f.endswith(".py")]
        configs = [f for f in files if Path(f).parent == Path(group) and f.endswith(".yaml")]
        assert len(modules) == 1 and len(configs) == 1, f"{kind}: {modules} {configs}"
        assert not (REPO / modules[0]).exists() and not (REPO / configs[0]).exists(), f"{kind} is not new"
    assert len(files) == 2 * len(PLUGINS), f"docs/extending.md adds other files: {files}"
    commands = [body for role, _, body in _blocks() if role == "run"]
    assert commands and all(c.strip().startswith("python ") and "\n" not in c.strip() for c in commands)


def test_every_new_config_file_validates_against_its_group_schema(sandbox: Path) -> None:
    options = [(Path(p).parent.name, Path(p).stem) for p in _files() if p.startswith("conf/")]
    out = _check(sandbox, "schemas", f"""
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
import litseg.chunkers.base, litseg.rag.config, litseg.training.config  # they register the schemas
from litseg.utils.config import SCHEMAS, from_dict
for group, option in {options!r}:
    entry = SCHEMAS[group]
    with initialize_config_dir(config_dir={str(sandbox / "conf")!r}, version_base="1.3"):
        cfg = compose(config_name=entry.entry, overrides=[f"{{group}}={{option}}"])
    from_dict(entry.schema, OmegaConf.to_container(OmegaConf.select(cfg, entry.key), resolve=False), where=entry.key)
    print("valid", group, option)
""")
    assert out.count("valid ") == len(PLUGINS)


def test_the_chunker_is_found_by_name_and_cuts_at_blank_lines(sandbox: Path) -> None:
    _check(sandbox, "chunker", f"""
import dataclasses
from litseg.chunkers.base import CHUNKERS, ConfigValueError, config_class
from litseg.chunkers.build import build_chunker, build_chunker_from_config
from litseg.segmentation.preprocess import prepare_document
from litseg.segmentation.types import Document
assert "paragraph" in CHUNKERS.names()
# conf/method/paragraph.yaml is the one home of its values: the config class has no default
import yaml
values = yaml.safe_load(open("conf/method/paragraph.yaml"))
fields = dataclasses.fields(config_class("paragraph"))
assert all(f.default is f.default_factory is dataclasses.MISSING for f in fields), fields
assert {{f.name for f in fields}} == set(values)
assert build_chunker("paragraph").min_chars == values["min_chars"]
text = {STORY!r}
doc = prepare_document(Document(book_id="story", text=text))
def mains(chunker):
    out = []
    for unit in doc.units:
        for chunk in chunker.chunk_unit(doc, unit).chunks:
            (s, e), = chunk.main_spans
            assert chunk.main_text == text[s:e]
            out.append(chunk.main_text)
    return out
assert mains(build_chunker("paragraph")) == {PARAGRAPHS!r}
joined = mains(build_chunker("paragraph", min_chars=40))  # the title joins the first paragraph
assert joined[0].startswith("The Lantern Keeper\\n\\nMara lit") and len(joined) == {len(PARAGRAPHS) - 1}
try:
    build_chunker_from_config({{"name": "paragraph", "min_char": 3}})
except ConfigValueError as exc:
    assert "method.min_char" in str(exc), exc
else:
    raise AssertionError("a misspelt setting was accepted")
""")


def test_annotate_runs_the_new_chunker_with_exact_spans(sandbox: Path) -> None:
    (args,) = _command("annotate.py")
    _python(sandbox, [*args, "hydra.run.dir=out/annotate"])
    chunks = [json.loads(line) for line in (sandbox / "out" / "annotate" / "chunks.jsonl").read_text().splitlines()]
    assert [c["method"] for c in chunks] == ["paragraph"] * len(PARAGRAPHS)
    assert [c["main_text"] for c in chunks] == PARAGRAPHS
    covered = set()
    for c in chunks:
        (s, e), = c["main_spans"]
        assert STORY[s:e] == c["main_text"]
        covered.update(range(s, e))
    assert all(STORY[i].isspace() for i in range(len(STORY)) if i not in covered)  # nothing of the text lost


def test_the_benchmark_loads_through_its_suite(sandbox: Path) -> None:
    _check(sandbox, "benchmark", """
from hydra import compose, initialize_config_dir
from pathlib import Path
from litseg.rag.benchmarks import BENCHMARKS
from litseg.rag.evaluation.run import load_suite
assert "jsonl_qa" in BENCHMARKS.names()
with initialize_config_dir(config_dir=str(Path("conf").resolve()), version_base="1.3"):
    cfg = compose(config_name="evaluate", overrides=["suite=my_qa"])
bench = load_suite(cfg.suite)
assert [b.book_id for b in bench.books] == ["lanterns"] and len(bench.questions) == 2 and not bench.warnings
text = bench.books[0].load_text()
for q in bench.questions:
    (s, e), = q.gold_spans
    assert text[s:e] == q.evidence_strings[0]
assert bench.questions[0].answers == ["Tomas"]
try:
    load_suite({"name": "my_qa", "loader": "jsonl_qa", "args": {"path": "nowhere.jsonl", "texts": "data"}})
except FileNotFoundError as exc:
    assert "path=nowhere.jsonl does not exist" in str(exc), exc
else:
    raise AssertionError("a missing file was accepted")
""")


def test_the_reward_is_built_from_its_rewards_file(sandbox: Path) -> None:
    _check(sandbox, "reward", """
import json
from pathlib import Path
from hydra import compose, initialize_config_dir
from litseg.training.config import train_config_from
from litseg.training.rewards import RewardContext, build_rewards
from litseg.utils.config import ConfigError
def composed(*overrides):
    with initialize_config_dir(config_dir=str(Path("conf").resolve()), version_base="1.3"):
        return train_config_from(compose(config_name="train", overrides=["rewards=block_size", *overrides]))
funcs, weights = build_rewards(composed().rewards, RewardContext())
assert [f.__name__ for f in funcs] == ["format", "block_size"] and weights == [0.3, 0.3]
def answer(*ranges):
    segments = [{"subtitle": "s", "from_idx": a, "to_idx": b, "context_idx": []} for a, b in ranges]
    return json.dumps({"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"},
                       "step3": {"chapter_title": "c", "step_3_turning_points": [], "segments": segments}})
completions = [answer((1, 8), (9, 16)), [{"role": "assistant", "content": answer((1, 4))}], "no JSON here"]
scores = funcs[1](completions, schema=["lite"] * 3, n_sentences=[16, 4, 3])
assert scores == [1.0, 0.5, 0.0], scores
try:
    build_rewards(composed("rewards.block_size.params.target=many").rewards, RewardContext())
except ConfigError as exc:
    assert "rewards.block_size.params.target" in str(exc), exc
else:
    raise AssertionError("a bad reward parameter was accepted")
""")


def test_the_vector_store_adds_and_searches_within_a_book(sandbox: Path) -> None:
    _check(sandbox, "store", """
from pathlib import Path
import numpy as np
from hydra import compose, initialize_config_dir
from litseg.rag.config import RetrievalConfig
from litseg.rag.index import SparseVector
from litseg.rag.stores import STORES, VectorStore, build_store
from litseg.utils.config import from_dict
assert "numpy" in STORES.names()
with initialize_config_dir(config_dir=str(Path("conf").resolve()), version_base="1.3"):
    cfg = compose(config_name="evaluate", overrides=["retrieval=numpy"])
store = build_store(from_dict(RetrievalConfig, cfg.retrieval, "retrieval").store)
assert isinstance(store, VectorStore) and type(store).__name__ == "NumpyStore"
store.create_collection("c", dense_dim=2, sparse=True)
dense = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [3.0, 0.1]])
sparse = [SparseVector((1,), (1.0,)), SparseVector((2,), (1.0,)), SparseVector((1, 2), (0.5, 0.5)), SparseVector((3,), (1.0,))]
books = [{"book_id": b} for b in ("a", "a", "a", "b")]
store.upsert("c", [0, 1, 2, 3], dense=dense, sparse=sparse, payloads=books)
assert store.count("c") == 4 and store.count("c", "a") == 3
(hits,) = store.search("c", "dense", [np.array([2.0, 0.0])], ["a"], [2])
assert [pid for pid, _ in hits] == [0, 2] and abs(hits[0][1] - 1.0) < 1e-6
(hits,) = store.search("c", "sparse", [SparseVector((1,), (2.0,))], ["a"], [5])
assert hits == [(0, 2.0), (2, 1.0)]  # only points sharing a term, never another book's
store.delete_collection("c")
store.close()
""")


def test_evaluate_runs_the_new_benchmark_and_store(sandbox: Path) -> None:
    runs = _command("evaluate.py")
    assert any("retrieval=numpy" in args for args in runs) and all("suite=my_qa" in args for args in runs)
    for n, args in enumerate(runs):
        # Run the entry script as the page shows it; then check that Qdrant was never imported
        # when the numpy store was chosen.
        wrapper = ("import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path('evaluate.py', run_name='__main__'); "
                   "print('qdrant imported:', 'qdrant_client' in sys.modules)")
        out = _python(sandbox, ["-c", wrapper, *args, f"hydra.run.dir=out/evaluate{n}", *FAST_EVALUATE])
        results = json.loads((sandbox / "out" / f"evaluate{n}" / "results.json").read_text())
        expected = []
        for a in args:
            if a.startswith("chunkers=["):
                expected += a[len("chunkers=["):-1].split(",")
            elif a.startswith("+method@chunkers."):
                expected.append(a[len("+method@chunkers."):].split("=")[0])
        labels = [r["label"] for r in results["results"]]
        assert labels == expected
        for r in results["results"]:
            assert r["n_questions"] == 2 and r["metrics"]["evidence@1500"]["estimate"] == 1.0, r["label"]
        if "retrieval=numpy" in args:
            assert "paragraph" in labels
            assert "qdrant imported: False" in out.stdout
