"""Benchmark loaders: FairytaleQA, LiteraryQA, GutenQA, NovelQA and NarrativeQA-style question tables.

The loaders live in :mod:`litseg.rag.benchmarks` (one module each, registered by name); this
module keeps the names importable from where they were. Each loader reads a local copy; users
with access to the Hugging Face hub can pass ``hub=<name>`` instead (``datasets`` is then
imported inside the call; it is not a dependency of litseg).
"""

from litseg.rag.benchmarks import BENCHMARKS, load_benchmark
from litseg.rag.benchmarks.fairytaleqa import fairytaleqa_story_text, load_fairytaleqa
from litseg.rag.benchmarks.gutenqa import load_gutenqa
from litseg.rag.benchmarks.literaryqa import load_literaryqa
from litseg.rag.benchmarks.novelqa import load_novelqa
from litseg.rag.benchmarks.qa_table import NARRATIVEQA_COLUMNS, NARRATIVEQA_HUB_COLUMNS, QAColumns, load_qa_table
from litseg.rag.benchmarks.records import Benchmark, BenchmarkBook, Evidence, Question, Span
from litseg.rag.benchmarks.tables import normalize_newlines, read_table, read_text_file, unwrap_hard_lines

__all__ = [
    "BENCHMARKS", "NARRATIVEQA_COLUMNS", "NARRATIVEQA_HUB_COLUMNS", "Benchmark", "BenchmarkBook", "Evidence",
    "QAColumns", "Question", "Span", "fairytaleqa_story_text", "load_benchmark", "load_fairytaleqa", "load_gutenqa",
    "load_literaryqa", "load_novelqa", "load_qa_table", "normalize_newlines", "read_table", "read_text_file", "unwrap_hard_lines",
]
