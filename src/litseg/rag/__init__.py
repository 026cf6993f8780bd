"""Retrieval-augmented QA evaluation of chunkers: benchmark loaders, evidence matching, metrics,
statistics and human-evaluation tooling.

Importing this package stays cheap (numpy only); libraries for particular metrics (rouge-score,
nltk, scipy, pandas, pingouin, scikit-learn, statsmodels, openpyxl) are imported by the functions
that use them. See docs/evaluation_metrics.md.
"""

from litseg.rag.benchmarks import load_benchmark
from litseg.rag.benchmarks.fairytaleqa import load_fairytaleqa
from litseg.rag.benchmarks.gutenqa import load_gutenqa
from litseg.rag.benchmarks.literaryqa import load_literaryqa
from litseg.rag.benchmarks.qa_table import QAColumns, load_qa_table
from litseg.rag.benchmarks.records import Benchmark, BenchmarkBook, Evidence, Question
from litseg.rag.evidence import (
    TextMatcher,
    chunk_is_relevant,
    contains_evidence,
    evidence_recovered_chars,
    locate_evidence,
    normalize_for_match,
    span_overlap_relevant,
)
from litseg.rag.metrics import (
    exact_match,
    generation_scores,
    meteor,
    random_retrieval_scores,
    retrieval_scores,
    rouge_l,
    token_f1,
)
from litseg.rag.chunk_quality import chunk_statistics, segment_quality
from litseg.rag.stats import bootstrap_ci, paired_comparison

__all__ = [
    "Benchmark", "BenchmarkBook", "Evidence", "QAColumns", "Question", "TextMatcher",
    "bootstrap_ci", "chunk_is_relevant", "chunk_statistics", "contains_evidence",
    "evidence_recovered_chars", "exact_match", "generation_scores", "load_benchmark",
    "load_fairytaleqa", "load_gutenqa", "load_literaryqa", "load_qa_table", "locate_evidence",
    "meteor", "normalize_for_match", "paired_comparison", "random_retrieval_scores",
    "retrieval_scores", "rouge_l", "segment_quality", "span_overlap_relevant", "token_f1",
]
