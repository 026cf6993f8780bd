"""The typed settings of ``evaluate.py``: one dataclass per section of ``conf/evaluate.yaml`` and per
config group it composes (``suite``, ``retrieval``, ``chunkers``), built with
:func:`litseg.utils.config.from_dict` so that a misspelt key fails with its dotted path.

Defaults live in the YAML. A config given from Python (tests, notebooks) may leave sections or
keys out: :func:`complete_config` fills them from the composed ``conf/evaluate.yaml`` (Hydra's
own composition), and a retrieval component built on its own from a mapping fills its section
from ``conf/retrieval/hybrid.yaml`` (:func:`retrieval_part`), so the code holds no second copy of
a default (``tests/config/test_config_schemas.py`` checks).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from litseg.chunkers.groups import (
    FeedbackConfig,
    PromptConfig,
    RagAnswerPrompt,
    RagJudgePrompt,
    RagRerankPrompt,
)
from litseg.llm.config import LLMConfig
from litseg.segmentation.config import PreprocessConfig
from litseg.llm.factory import llm_config_from
from litseg.utils.tracking import LoggerConfig
from litseg.utils.config import config_schema, from_dict, shipped_option, to_plain
from litseg.utils.locations import checkout_root, config_dir

DEFAULT_CONF_DIR = config_dir()
#: Where a suite's relative data paths are also looked for (after the working directory): the
#: checkout; none for an installed package, whose suites read ``shared_dir`` ($LITSEG_SHARED_DIR).
DATA_BASE_DIRS: tuple[Path, ...] = tuple(root for root in (checkout_root(),) if root is not None)
TextField = Literal["main_text", "text"]
T = TypeVar("T")


# ==================================================================================== suite
@config_schema("suite", entry="evaluate")
@dataclass(frozen=True)
class SuiteConfig:
    """``conf/suite/*.yaml``: a benchmark (a registered loader and its arguments) and its use.
    Every suite file gives every key, so no field has a default; a suite given from Python
    (together with its benchmark object, or as a partial mapping) is completed by :func:`python_suite`."""

    name: str
    loader: str | None
    args: dict[str, Any]
    # Use the first N books / a seeded sample of N questions (null = all).
    max_books: int | None
    max_questions: int | None
    answer_style: str
    objective: str | None


def python_suite(given: Mapping[str, Any]) -> dict[str, Any]:
    """A suite section written in Python (``{"name": "mine"}`` beside its benchmark object,
    ``load_suite({"name": ..., "loader": ..., "args": ...})``) with what it leaves out unset: no
    loader, arguments or limits, no answer style or objective. These are not defaults a suite file
    could take (each conf/suite file writes every key) but what "not given" means from Python."""
    unset: dict[str, Any] = {"loader": None, "args": {}, "max_books": None, "max_questions": None,
                             "answer_style": "", "objective": None}
    return {**unset, **given}


# ================================================================================ retrieval
#: The retrieval option whose sub-sections a component built on its own from a partial mapping
#: completes its settings from (:func:`retrieval_part`): evaluate.yaml's default.
RETRIEVAL_HOME = "hybrid"


@dataclass(frozen=True)
class EmbedderConfig:
    model: str
    query_prefix: str
    passage_prefix: str
    batch_size: int
    device: str | None
    dimension: int | None = None  # hashing embedder only (else the model's own); no YAML writes it


@dataclass(frozen=True)
class BM25Config:
    k1: float
    b: float
    method: str
    stopwords: str | list[str] | None
    stemmer: str | None
    idf_scope: Literal["book", "corpus"]


@dataclass(frozen=True)
class StoreConfig:
    """``retrieval.store``: ``backend`` names a registered vector store (litseg.rag.stores)."""

    backend: str
    location: str
    api_key_env: str | None
    prefer_grpc: bool
    timeout_s: float
    upsert_batch: int
    search_batch: int
    on_disk: bool
    collection_prefix: str
    partition: Literal["none", "book"]


@dataclass(frozen=True)
class RerankConfig:
    kind: Literal["none", "cross_encoder", "llm"]
    top_n: int
    model: str | None
    batch_size: int
    max_chars: int
    constrained: bool
    # Not written by the YAML: the cross-encoder's own window and device unless set.
    max_length: int | None = 512
    device: str | None = None
    prompt: RagRerankPrompt | None = None  # conf/prompt/rag_rerank.yaml (kind=llm)


@config_schema("retrieval", entry="evaluate", default_option="hybrid")
@dataclass(frozen=True)
class RetrievalConfig:
    """``conf/retrieval/*.yaml``: every value is written there (conf/retrieval/hybrid.yaml, which
    the other options build on)."""

    embedder: EmbedderConfig
    bm25: BM25Config
    store: StoreConfig
    rerank: RerankConfig
    mode: Literal["hybrid", "dense", "sparse"]
    fusion: Literal["rrf", "weighted"]
    rrf_k: float
    dense_weight: float
    sparse_weight: float
    candidates: int | None


def retrieval_part(schema: type[T], key: str, cfg: Any) -> T:
    """A retrieval sub-section (``embedder``, ``bm25``, ``store``, ``rerank``) as ``schema``: as given
    when typed, else the given keys over ``conf/retrieval/hybrid.yaml``'s section, their one home
    (a component built on its own from Python: tests, notebooks)."""
    if isinstance(cfg, schema):
        return cfg
    given = dict(to_plain(cfg) or {})
    return from_dict(schema, {**shipped_option("retrieval", RETRIEVAL_HOME, key), **given}, f"retrieval.{key}")


# ======================================================================= the other sections
@dataclass(frozen=True)
class MetricsConfig:
    ks: list[int]
    mrr_k: int
    budgets: list[int]
    min_overlap: float
    string_field: TextField
    index_text: TextField
    segment_quality: bool
    confidence: float
    n_resamples: int
    seed: int
    keep_top: int


@dataclass(frozen=True)
class AnswerContextConfig:
    budget_chars: int
    text: str  # text | main_text (checked by ContextBudget; an interpolation before resolving)
    max_chunks: int | None


@dataclass(frozen=True)
class GenerationConfig:
    enabled: bool
    max_questions: int | None
    max_tokens: int
    batch_size: int
    llm: LLMConfig | None = None  # composed from llm@generation.llm
    prompt: RagAnswerPrompt | None = None


@dataclass(frozen=True)
class JudgeConfig:
    enabled: bool
    max_tokens: int
    batch_size: int
    constrained: bool
    llm: LLMConfig | None = None  # composed from llm@judge.llm
    prompt: RagJudgePrompt | None = None


@dataclass(frozen=True)
class ObjectiveConfig:
    metric: str | None
    chunker: str | None


@dataclass(frozen=True)
class ReportConfig:
    plots: bool
    save_chunks: bool


@dataclass(frozen=True)
class ChunkingConfig:
    """How every chunker runs: through the annotation run of annotate.py (litseg.annotation)."""

    window_units: int


@dataclass(frozen=True)
class StudentConfig:
    method: dict[str, Any]
    backend: str
    llm: dict[str, Any]


# A chunker entry: a method config (``name`` + parameters), ``{chunks: PATH}``, a derived row
# (``from``/``merge``), or null (removed with ~chunkers.x); a list of names from Python.
ChunkerEntries = dict[str, dict[str, Any] | None] | list[Any] | str | None


@config_schema("chunkers", entry="evaluate", key=".")
@dataclass(frozen=True)
class EvaluateConfig:
    """The whole composed ``conf/evaluate.yaml``. It is the schema of the ``chunkers`` group too:
    that group is a mapping label -> chunker settings (any registered chunker's parameters), so
    it is typed where it sits, as the ``chunkers`` field of the entry config (``key="."``)."""

    suite: SuiteConfig
    retrieval: RetrievalConfig
    metrics: MetricsConfig
    answer_context: AnswerContextConfig
    generation: GenerationConfig
    judge: JudgeConfig
    objective: ObjectiveConfig
    report: ReportConfig
    chunking: ChunkingConfig
    student: StudentConfig
    shared_dir: str
    chunk_files: list[Any]
    students: str | list[str] | None
    pairwise_metrics: list[str] | None
    progress: bool
    export_texts: str | None
    # `chunkers=[]` composes no chunkers at all (students or chunk_files only).
    chunkers: ChunkerEntries = None
    # Groups typed by their own schemas (conf/llm, prompt, feedback, preprocess, logger).
    llm: LLMConfig | None = None
    prompt: PromptConfig | None = None
    feedback: FeedbackConfig | None = None
    preprocess: PreprocessConfig | None = None
    logger: LoggerConfig | None = None

    def __post_init__(self) -> None:
        if isinstance(self.chunkers, Mapping):
            for label, entry in self.chunkers.items():
                if entry is not None and not ({"name", "chunks", "from"} & set(entry)):
                    raise ValueError(f"chunkers.{label}: needs `name` (a chunker), `chunks` (a file or run "
                                     "folder) or `from` (a derived row)")


# ============================================================================== composition
@contextmanager
def hydra_conf(conf_dir: Path = DEFAULT_CONF_DIR) -> Iterator[None]:
    """Hydra's compose API over ``conf_dir``, without touching a running app's state.

    Outside a Hydra app the compose API is set up over ``conf_dir`` for the block. Inside one
    (evaluate.py composing a student's method config) Hydra's global state belongs to the app and
    is already set up over the same configs (the entries take theirs from
    :func:`~litseg.utils.locations.config_dir`, the default here), so compose goes through it as
    it is: no second setup, nothing to set aside or restore. Composing another folder from inside
    an app would silently read the app's, so that is refused."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_method_chunkers(conf_dir)
    folder = Path(conf_dir).resolve()
    running = GlobalHydra.instance()
    if not running.is_initialized():
        with initialize_config_dir(config_dir=str(folder), version_base="1.3"):
            yield
        return
    sources = [s.path for s in running.config_loader().get_sources() if s.scheme() == "file"]
    if not any(Path(s).resolve() == folder for s in sources):
        raise RuntimeError(f"cannot compose {folder} inside a running Hydra app whose configs are "
                           f"{', '.join(sources) or 'not folders'}")
    yield


#: Methods that are no chunkers option: ``imported`` replays the books its records name, not the
#: benchmark's (evaluate its run folder with ``+chunkers.NAME={chunks: RUN}``, docs/importing.md).
NOT_CHUNKERS = frozenset({"imported"})


def register_method_chunkers(conf_dir: Path = DEFAULT_CONF_DIR) -> list[str]:
    """Make every ``conf/method/<name>.yaml`` an option of the ``chunkers`` group, so that a
    chunker needs one module and one config file: ``chunkers=[token,recursive]`` composes each
    method's YAML under ``chunkers.<name>`` (its parameters, overridable as
    ``chunkers.recursive.chunk_size=...``). The options are entries of Hydra's ConfigStore, which
    Hydra searches after ``conf/``: a file ``conf/chunkers/<name>.yaml`` (a set such as
    ``baselines``, a variant with its own model) takes precedence. Returns the names registered;
    call it before Hydra composes (evaluate.py does, and so does :func:`hydra_conf`)."""
    from hydra.core.config_store import ConfigStore

    conf = Path(conf_dir)
    names = sorted(p.stem for p in (conf / "method").glob("*.yaml")
                   if p.stem not in NOT_CHUNKERS and not (conf / "chunkers" / p.name).is_file())
    store = ConfigStore.instance()
    for name in names:
        store.store(group="chunkers", name=name, node={"defaults": [{"/method@_here_": name}]},
                    package=f"chunkers.{name}", provider="litseg")
    return names


def compose(config_name: str | None, overrides: Sequence[str] = (), conf_dir: Path = DEFAULT_CONF_DIR
            ) -> dict[str, Any]:
    """``hydra.compose`` of ``config_name`` with ``overrides``, as plain unresolved containers."""
    from hydra import compose as hydra_compose
    from omegaconf import OmegaConf

    with hydra_conf(conf_dir):
        cfg = hydra_compose(config_name=config_name, overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=False)  # type: ignore[return-value]


@functools.lru_cache(maxsize=4)
def _default_sections(conf_dir: str) -> dict[str, Any]:
    return compose("evaluate", conf_dir=Path(conf_dir))


#: Sections whose value a Python caller gives whole (not laid over the YAML's).
_WHOLE = ("suite", "chunkers", "llm", "prompt", "feedback")
#: Config groups placed inside sections: a given one replaces the default one.
_WHOLE_INSIDE = ("generation.llm", "generation.prompt", "judge.llm", "judge.prompt", "retrieval.rerank.prompt")


def _merged(base: Any, given: Any, path: str = "") -> Any:
    if path in _WHOLE_INSIDE or not (isinstance(base, Mapping) and isinstance(given, Mapping)):
        return given
    out = dict(base)
    for k, v in given.items():
        if k != "defaults":  # a YAML loaded without Hydra still holds its defaults list
            out[k] = _merged(base[k], v, f"{path}.{k}" if path else str(k)) if k in base else v
    return out


def complete_config(cfg: Any, conf_dir: Path = DEFAULT_CONF_DIR) -> dict[str, Any]:
    """``cfg`` as plain resolved containers with every key present: a config composed by Hydra
    as it is, a partial dict from Python laid over the composed ``conf/evaluate.yaml``."""
    from omegaconf import DictConfig, OmegaConf

    if isinstance(cfg, DictConfig):
        return to_plain(cfg)  # type: ignore[no-any-return]
    given = dict(to_plain(cfg) or {})
    base = {k: v for k, v in _default_sections(str(conf_dir)).items() if k not in _WHOLE}
    merged = _merged(base, given)
    for k in _WHOLE:
        merged.setdefault(k, None)
    if isinstance(merged["suite"], Mapping):  # a suite given with its benchmark object: unset keys unset
        merged["suite"] = python_suite(merged["suite"])
    return OmegaConf.to_container(OmegaConf.create(merged), resolve=True)  # type: ignore[return-value]


#: Where an evaluate config holds llm sections (each typed by llm_config_from).
LLM_SECTIONS = (("llm",), ("generation", "llm"), ("judge", "llm"))


def evaluate_config(cfg: Any, conf_dir: Path = DEFAULT_CONF_DIR) -> EvaluateConfig:
    """The typed whole of a run's config (see :func:`complete_config`), its llm sections typed
    by :func:`~litseg.llm.factory.llm_config_from` (a section written in code may leave out
    its cache)."""
    data = complete_config(cfg, conf_dir)
    for *parents, key in LLM_SECTIONS:
        node = data
        for part in parents:
            node = node[part]
        node[key] = llm_config_from(node[key], ".".join((*parents, key)))
    return from_dict(EvaluateConfig, data)


def method_config(name: str, conf_dir: Path = DEFAULT_CONF_DIR) -> dict[str, Any]:
    """``conf/method/<name>.yaml`` composed by Hydra (its defaults list included, e.g.
    ``/prompt@template: lumberchunker``): the parameters ``annotate.py method=<name>`` uses."""
    known = sorted(p.stem for p in (Path(conf_dir) / "method").glob("*.yaml"))
    if name not in known:
        raise ValueError(f"unknown chunker {name!r}: no {Path(conf_dir) / 'method' / (name + '.yaml')}; "
                         f"methods: {', '.join(known)}")
    from omegaconf import OmegaConf

    composed = compose(None, [f"+method={name}"], conf_dir)["method"]
    return OmegaConf.to_container(OmegaConf.create(composed), resolve=True)  # type: ignore[return-value]


# On import, as the schemas above register themselves: the default `chunkers: baselines` names
# methods, so composing conf/evaluate.yaml needs these options (tests and notebooks compose it).
register_method_chunkers()


def logger_settings(cfg: LoggerConfig | Mapping[str, Any] | None) -> LoggerConfig | None:
    """The typed ``logger`` group (conf/logger, shared with train.py); None when not given."""
    if cfg is None or isinstance(cfg, LoggerConfig):
        return cfg
    return from_dict(LoggerConfig, cfg, "logger")


def report_settings(cfg: ReportConfig | Mapping[str, Any] | None) -> ReportConfig:
    """The typed ``report`` section; a mapping from Python is completed from conf/evaluate.yaml."""
    if isinstance(cfg, ReportConfig):
        return cfg
    base = _default_sections(str(DEFAULT_CONF_DIR))["report"]
    return from_dict(ReportConfig, {**base, **dict(to_plain(cfg) or {})}, "report")
