#!/usr/bin/env python3
"""vLLM's own pipeline-parallel split: which decoder layers each stage holds
(``get_pp_indices``, with and without ``VLLM_PP_LAYER_PARTITION``) and the parameters of
each stage of small models (where the embedding, a tied lm_head and the final norm live).

Run with an oracle interpreter (vLLM installed, CPU only)::

    ORACLE_DIR=/work/oracle /work/.venvs/oracle-0.33.0/bin/python tools/pp_oracle.py \\
        --indices tests/golden/oracle/vllm-0.33.0/pp-indices.json \\
        --out tests/golden/oracle/vllm-0.33.0/pp-weights.jsonl.gz

``--indices``: vLLM's ``vllm.distributed.utils.get_pp_indices(num_hidden_layers, rank,
pp_size)`` for a grid of layer counts and pipeline sizes, and for partition strings
(valid and refused) set in ``VLLM_PP_LAYER_PARTITION``; its ValueError text is the answer
for a refused string.

``--out``: tools/weights_oracle.py's model build for each stage: the process group of
one CPU process answers for the pipeline group as stage ``rank`` of ``pp_size`` (the
``rank_in_group`` / ``world_size`` / ``is_first_rank`` / ``is_last_rank`` the model
classes read from ``get_pp_group()``), so vLLM's own model code decides what each stage
builds. tests/golden/test_pp_stages.py compares selector/memory/pp.py with both.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import oracle
from startup_fact_grid import record_answers, small_models

LAYERS = (1, 2, 3, 5, 7, 8, 12, 13, 30, 32, 36, 40, 48, 61, 62, 64, 78, 80, 94, 126)
SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 16)
PARTITIONS: tuple[tuple[int, int, str], ...] = (
    (32, 2, "10,22"), (32, 4, "8,8,8,8"), (61, 4, "16,15,15,15"), (32, 3, "0,16,16"),
    (32, 2, "16,15"), (32, 3, "16,16"), (32, 2, "a,b"), (32, 2, "16, 16"), (32, 2, " 16,16 "),
)
"""(layers, pp_size, VLLM_PP_LAYER_PARTITION): valid splits, a wrong sum, a wrong count,
a non-integer, and spaces (int() takes them)."""

_LLAMA, _QWEN3_MOE, _MIXTRAL, _GPT_OSS = small_models(5, dense_first=True)
MODELS: dict[str, dict[str, Any]] = {
    "llama": _LLAMA,
    "llama-tied": {**_LLAMA, "tie_word_embeddings": True},
    "qwen2": {**_LLAMA, "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"},
    "qwen3_moe-dense-first": _QWEN3_MOE,
    "mixtral": _MIXTRAL,
    "gpt_oss": _GPT_OSS,
}


def index_answers() -> dict[str, Any]:
    """vLLM's get_pp_indices over the grid and the partition strings."""
    import vllm
    from vllm.distributed import utils

    os.environ.pop("VLLM_PP_LAYER_PARTITION", None)
    grid = [{"layers": n, "pp_size": pp,
             "stages": [list(utils.get_pp_indices(n, rank, pp)) for rank in range(pp)]}
            for n in LAYERS for pp in SIZES if pp <= n]
    listed = []
    for n, pp, text in PARTITIONS:
        os.environ["VLLM_PP_LAYER_PARTITION"] = text
        try:
            answer: Any = [list(utils.get_pp_indices(n, rank, pp)) for rank in range(pp)]
        except ValueError as exc:
            answer = str(exc)
        finally:
            os.environ.pop("VLLM_PP_LAYER_PARTITION", None)
        listed.append({"layers": n, "pp_size": pp, "partition": text, "answer": answer})
    return {"vllm_version": vllm.__version__, "grid": grid, "partitions": listed}


def stage_rows() -> list[dict[str, Any]]:
    return [{"id": f"{name}-pp{pp}-rank{rank}", "config": config, "pp_size": pp, "pp_rank": rank,
             "engine_args": {"pipeline_parallel_size": pp,
                             "distributed_executor_backend": "mp"}}
            for name, config in MODELS.items() for pp in (2, 3) for rank in range(pp)]


class _Stage:
    """The pipeline group as stage ``rank`` of ``size`` sees it; the rest is the real
    one-process group."""

    def __init__(self, real: Any, rank: int, size: int) -> None:
        self._real = real
        self.rank_in_group, self.world_size = rank, size
        self.is_first_rank, self.is_last_rank = rank == 0, rank == size - 1

    def __getattr__(self, item: str) -> Any:
        return getattr(self._real, item)


def stage_answer(row: dict[str, Any], workdir: Path) -> dict[str, Any]:
    import weights_oracle
    from vllm.distributed import parallel_state

    real = parallel_state._PP
    parallel_state._PP = _Stage(real, row["pp_rank"], row["pp_size"])
    try:
        out = weights_oracle.answer(row, workdir)
    finally:
        parallel_state._PP = real
    out.update(pp_size=row["pp_size"], pp_rank=row["pp_rank"], engine_args=row["engine_args"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--indices", type=Path, required=True, help="a .json file")
    parser.add_argument("--out", type=Path, required=True, help="a .jsonl.gz file")
    args = parser.parse_args(argv)
    oracle.start_models()
    oracle.write_json(args.indices, index_answers())
    record_answers(args.out, stage_rows(), stage_answer,
                   lambda result: f"{len(result['parameters'])} parameters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
