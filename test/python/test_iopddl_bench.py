"""benchmarks/iopddl_bench.py's reader of the suite's reference table (its README)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import iopddl_bench as bench  # noqa: E402

HEADER = "| instance | model, mesh | nodes | limit | best | median | XLA |\n|---|---|---|---|---|---|---|\n"


def _refs(tmp_path, rows):
    (tmp_path / "README.md").write_text("# suite\n\n" + HEADER + rows)
    return bench.reference_table(str(tmp_path))


def test_score_cells_may_carry_a_note_and_may_be_blank(tmp_path):
    refs = _refs(tmp_path, "| G | Transformer, [2,16] | 816 | 120 s | 217,039 | 12,237,022 | 1,264,777 |\n"
                           "| V | Transformer, [2,4,4] | 816 | 300 s | 1,617,084 (optimal) | 62,506,733 | |\n")
    assert refs["G"] == {"model": "Transformer, [2,16]", "nodes": 816, "limit": 120.0, "best": 217039,
                         "median": 12237022, "xla": 1264777}
    assert refs["V"]["best"] == 1617084 and refs["V"]["xla"] is None and refs["V"]["limit"] == 300.0


def test_a_score_cell_without_a_number_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"score cell reads 'unknown'"):
        _refs(tmp_path, "| K | GNS, [2,16] | 34,932 | 180 s | unknown | 5,630,357,808 | |\n")
