"""benchmarks/student_eval.py reads evaluate.py's results.json the way evaluate.py writes it."""

from __future__ import annotations

import importlib.util
import json

from tests.conftest import REPO


def load_script():
    spec = importlib.util.spec_from_file_location("student_eval", REPO / "benchmarks" / "student_eval.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(label: str, mrr: float) -> dict:
    # The shape of one entry of results.json["results"] (litseg.rag.evaluation).
    est = lambda x: {"estimate": x, "low": x - 0.05, "high": x + 0.05}  # noqa: E731
    return {"label": label, "metrics": {"mrr@10": est(mrr), "hit@1": est(mrr - 0.1), "random_hit@1": est(0.1),
                                        "evidence@1500": est(0.5)},
            "chunks": {"words": {"mean": 150.0, "p50": 140.0}}}


def test_the_table_takes_every_column_from_evaluate_results():
    se = load_script()
    results = {"results": [row("recursive", 0.66), row("semantic", 0.72), row("litseg_lite_student", 0.65)],
               "pairwise": [{"a": "recursive", "b": "litseg_lite_student", "metric": "mrr@10", "diff": 0.01,
                             "diff_low": -0.03, "diff_high": 0.05, "p_permutation": 0.5}]}
    results["main_text"] = {"results": [row("litseg_lite_student", 0.68)], "pairwise": []}
    stats = {"student": {"first_try_valid": 1.0, "fallback_repair": 0.0, "fallback_whole_unit": 0.0,
                         "placeholder_share": 0.0, "repeated_subtitles": 0.5, "seconds_per_unit": 60.0}}
    text = se.table(results, stats, {"student": {"boundary_f1": 0.47, "units": 18}})
    student = next(line for line in text.splitlines() if line.startswith("| LitSeg-Lite student"))
    cells = [c.strip() for c in student.strip("|").split("|")]
    assert cells[1:4] == ["0.650", "0.680", "0.550"]
    assert cells[4:7] == ["0.100", "0.500", "150"]
    assert cells[-3:] == ["50 %", "60.0", "0.470 (18 units)"]
    assert "litseg_lite_student minus recursive: -0.010 [-0.050, +0.030], permutation p = 0.5" in se.paired_lines(results)
    json.dumps(results)  # the fixture stays JSON, as results.json is
