#!/usr/bin/env python3
"""vLLM's own derived max_model_len for a grid of synthetic configs (tools/startup_fact_grid.py).

Run with an oracle interpreter (vLLM installed, CPU only), once per release::

    ORACLE_DIR=/work/oracle /work/venvs/oracle-0.33.0/bin/python tools/max_len_oracle.py \\
        --out tests/golden/oracle/vllm-0.33.0/max-model-len.jsonl.gz

For every config it writes the config.json to a temporary directory, builds vLLM's
``ModelConfig`` from it (the constructor derives the default ``max_model_len`` with
``ModelConfig.get_and_verify_max_len`` -> ``_get_and_verify_max_len`` in
vllm/config/model.py, reading ``derived_max_model_len_and_key`` from the release's
model-architecture convertor and the rope parameters transformers and vLLM patched in),
then calls the same unmodified ``get_and_verify_max_len`` with a user ``max_model_len``
of ``HUGE_MAX_MODEL_LEN``, the derived length, and one more, recording vLLM's
``ValueError`` text or ``None`` (accepted). The vLLM import is the one of
the harness's ``oracle.start_models`` (tools/oracle/). Nothing here decides an answer:
tests/golden/test_startup_facts.py compares the tool with these records.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path
from typing import Any

import oracle
from startup_fact_grid import HUGE_MAX_MODEL_LEN, max_len_configs, new_answer, record_answers

DERIVED = re.compile(r"derived max_model_len \((\w+)=([^ ]+) or model_max_length=")
"""The derived length in vLLM's refusal (vllm/config/model.py, get_and_verify_max_len)."""


def _ask(model_config: Any, max_model_len: int) -> str | None:
    try:
        model_config.get_and_verify_max_len(max_model_len)
    except ValueError as exc:
        return str(exc)
    return None


def answer(row: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """vLLM's answers for one grid row (or the error vLLM raised building the config)."""
    import vllm
    from vllm.config import ModelConfig

    target, out = new_answer(row, workdir, vllm.__version__)
    try:
        model_config = ModelConfig(model=str(target), skip_tokenizer_init=True)
    except Exception as exc:  # vLLM's refusal to build the config is an answer too
        out["status"] = "error"
        out["error"] = f"{type(exc).__name__}: {exc}"[:1000]
        return out
    out["status"] = "ok"
    out["default_max_model_len"] = model_config.max_model_len
    rope = getattr(model_config.hf_text_config, "rope_parameters", None)
    out["rope_parameters"] = rope if isinstance(rope, dict) else None
    huge = _ask(model_config, HUGE_MAX_MODEL_LEN)
    asked: dict[str, str | None] = {str(HUGE_MAX_MODEL_LEN): huge}
    match = DERIVED.search(huge or "")
    if match:
        derived = math.floor(float(match.group(2)))
        asked[str(derived)] = _ask(model_config, derived)
        asked[str(derived + 1)] = _ask(model_config, derived + 1)
    out["asked"] = asked
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True, help="a .jsonl.gz file")
    args = parser.parse_args(argv)
    oracle.start_models()
    record_answers(args.out, max_len_configs(), answer, lambda result: result.get("default_max_model_len"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
