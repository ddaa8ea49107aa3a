#!/usr/bin/env python3
"""vLLM's own weight shapes for small synthetic MoE configs (tools/startup_fact_grid.py).

Run with an oracle interpreter (vLLM installed, CPU only), once per release::

    ORACLE_DIR=/work/oracle ORACLE_EXTRA_PATH=/path/to/extra \\
        /work/venvs/oracle-0.33.0/bin/python tools/weights_oracle.py \\
        --out tests/golden/oracle/vllm-0.33.0/weights.jsonl.gz

(``ORACLE_EXTRA_PATH``: a directory with torchvision, which the Llama-4 multimodal
module imports; see tools/vllm_model_reference.py.)

For every config it builds the ``VllmConfig`` as ``vllm serve --enforce-eager`` does
(``EngineArgs(...).create_engine_config()``; eager, because 0.25.1's compilation backend
imports FlashInfer's communication module, which needs libcudart; the weights are the
same), instantiates the model class vLLM's
registry resolves (``get_model_architecture``) under ``torch.device("meta")`` (no
memory), exactly as tools/vllm_model_reference.py does, and records every parameter
of the module tree: name, shape and dtype (``named_parameters()``). The answers show,
from vLLM's own model classes, which MoE layers carry a shared expert and of what
size (Llama-4's ``Llama4MoE``), and which experts carry biases (gpt-oss's
``w13_bias`` / ``w2_bias``); tests/golden/test_startup_facts.py compares the tool's
weight estimate (selector/memory/weights.py) with them, part by part.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

from startup_fact_grid import new_answer, record_answers, weight_configs  # noqa: E402


def answer(row: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """vLLM's parameters for one config (or the error vLLM raised)."""
    import torch
    import vllm
    from vllm.config import set_current_vllm_config
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader.utils import get_model_architecture
    from vllm.utils.torch_utils import set_default_torch_dtype
    from vllm_model_reference import _device_tensors_on_meta

    target, out = new_answer(row, workdir, vllm.__version__)
    stage = "EngineArgs.create_engine_config"
    try:
        vllm_config = EngineArgs(model=str(target), skip_tokenizer_init=True,
                                 dtype="bfloat16", max_model_len=2048,
                                 enforce_eager=True,
                                 **row.get("engine_args", {})).create_engine_config()
        model_config = vllm_config.model_config
        stage = "model class"
        model_cls, arch = get_model_architecture(model_config)
        out["architecture"] = arch
        out["model_class"] = f"{model_cls.__module__}.{model_cls.__qualname__}"
        if vllm_config.quant_config is not None:
            out["quant_config"] = type(vllm_config.quant_config).__name__
        stage = "model construction"
        with (
            set_current_vllm_config(vllm_config),
            set_default_torch_dtype(model_config.dtype),
            torch.device("meta"),
            _device_tensors_on_meta(),
        ):
            model = model_cls(vllm_config=vllm_config, prefix="")
        out["parameters"] = [[name, list(param.shape), str(param.dtype).removeprefix("torch.")]
                             for name, param in model.named_parameters()]
        out["status"] = "ok"
    except Exception as exc:  # vLLM's refusal is an answer too
        out["status"] = "error"
        out["stage"] = stage
        out["error"] = f"{type(exc).__name__}: {exc}"[:1000]
        out["traceback_tail"] = traceback.format_exc().splitlines()[-8:]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True, help="a .jsonl.gz file")
    args = parser.parse_args(argv)
    import vllm_model_reference

    vllm_model_reference._bootstrap()
    record_answers(args.out, weight_configs(), answer,
                   lambda result: f"{len(result['parameters'])} parameters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
