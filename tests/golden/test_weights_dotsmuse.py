"""The weight estimate against vLLM 0.33.0's own model classes for the synthetic Muse Spark
(and Muse Glimmer) configs, which the real-config grid of test_weights_configs.py leaves out.

vLLM's answers: ``tests/golden/oracle/vllm-0.33.0/weights-dotsmuse.jsonl.gz`` (each model
class built on the meta device at TP 1 and 2 by ``tools/weights_oracle.py``'s
``real_answer``, the parameters of rank 0). Each total is within 1 % of vLLM's bytes per GPU
and each part group within 1 % of the whole.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from selector.catalog import load_catalog
from selector.memory.weights_reference import WeightComparison, comparisons, load_answers

ROOT = Path(__file__).resolve().parents[2]
ANSWERS = ROOT / "tests" / "golden" / "oracle" / "vllm-0.33.0" / "weights-dotsmuse.jsonl.gz"
CHECKED = {"MuseSparkForConditionalGeneration", "MuseGlimmerForConditionalGeneration",
           "MuseGlimmerForCausalLM"}


@cache
def _rows() -> dict[tuple[str, int], WeightComparison]:
    assert ANSWERS.is_file(), f"{ANSWERS} is missing"
    rows = comparisons(load_catalog(), "vllm==0.33.0", list(load_answers(ANSWERS)))
    return {(row.id, row.tp): row for row in rows}


@pytest.mark.parametrize(("name", "tp"), [(name, tp) for name in sorted(CHECKED) for tp in (1, 2)])
def test_the_estimate_is_within_one_percent_of_vllm(name: str, tp: int) -> None:
    row = _rows()[(name, tp)]
    assert row.tool_bytes is not None and row.error is not None
    assert abs(row.error) <= 0.01, f"{row.error * 100:+.2f} %"
    for group in set(row.vllm_parts) | set(row.tool_parts):
        mine, theirs = row.tool_parts.get(group, 0), row.vllm_parts.get(group, 0)
        assert abs(mine - theirs) <= 0.01 * row.vllm_bytes, (group, mine, theirs)
