#!/usr/bin/env python3
"""vLLM's own quantized weights: the parameters each quantization method creates
(``create_weights``), on small synthetic models, one row per checkpoint scheme or
``--quantization`` value (tools/weights_oracle.py's model build, with the scheme kept).

Run with an oracle interpreter (vLLM installed, CPU only)::

    ORACLE_DIR=/work/oracle ORACLE_EXTRA_PATH=/path/to/extra \\
        /work/.venvs/oracle-0.33.0/bin/python tools/quant_oracle.py \\
        --out tests/golden/oracle/vllm-0.33.0/quant-weights.jsonl.gz

(``ORACLE_EXTRA_PATH``: a directory with ``compressed-tensors`` (the release's pinned
version, ``pip install --no-deps --target DIR compressed-tensors==0.17.0 loguru``), which
vLLM's MoE and compressed-tensors methods import; ``ORACLE_DIST_PORT`` a free port.)

For every row the model class vLLM's registry resolves is built under
``torch.device("meta")`` from ``EngineArgs(model=..., quantization=...)`` exactly as
tools/weights_oracle.py builds it, and every parameter is recorded (name, shape, dtype):
which layers the method quantizes (embeddings, lm_head, the ``ignore`` /
``modules_to_not_convert`` lists, routers), the packed weights and the scales, zero
points and group indices it adds. tests/golden/test_quant_weights.py compares the tool's
weight bytes (selector/memory/quant.py) with them, part by part.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import oracle
from startup_fact_grid import record_answers, small_models

_LLAMA, _QWEN3_MOE, _MIXTRAL, _GPT_OSS = small_models(2, dense_first=False)


def _ct_group(num_bits: int, kind: str, group_size: int | None, strategy: str,
              ignore: list[str], fmt: str, inputs: dict[str, Any] | None = None,
              actorder: str | None = None) -> dict[str, Any]:
    """A compressed-tensors ``quantization_config`` of one config group over ``Linear``."""
    weights: dict[str, Any] = {"num_bits": num_bits, "type": kind, "symmetric": True,
                               "strategy": strategy, "group_size": group_size,
                               "dynamic": False, "actorder": actorder}
    return {"quant_method": "compressed-tensors", "format": fmt, "ignore": ignore,
            "quantization_status": "compressed", "kv_cache_scheme": None,
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                          "input_activations": inputs}}}


_FP8_DYNAMIC_INPUTS = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "token",
                       "dynamic": True}
_NVFP4_INPUTS = {"num_bits": 4, "type": "float", "symmetric": True, "strategy": "tensor_group",
                 "group_size": 16, "dynamic": "local"}
_MXFP4_NOT_CONVERTED = ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                        "model.embed_tokens", "lm_head"]

SCHEMES: dict[str, dict[str, Any]] = {
    "fp8-tensor-dynamic": {"quant_method": "fp8", "activation_scheme": "dynamic"},
    "fp8-tensor-static": {"quant_method": "fp8", "activation_scheme": "static"},
    "fp8-block": {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
                  "weight_block_size": [128, 128]},
    "fp8-block-not-converted": {"quant_method": "fp8", "activation_scheme": "dynamic",
                                "weight_block_size": [128, 128],
                                "modules_to_not_convert": ["gate", "lm_head"]},
    "awq-g128": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
                 "version": "gemm"},
    "awq-g64-not-converted": {"quant_method": "awq", "bits": 4, "group_size": 64,
                              "zero_point": True, "version": "gemm",
                              "modules_to_not_convert": ["down_proj"]},
    "gptq-g128": {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False,
                  "sym": True},
    "gptq-g128-act-order": {"quant_method": "gptq", "bits": 4, "group_size": 128,
                            "desc_act": True, "sym": True},
    "gptq-8bit-g64": {"quant_method": "gptq", "bits": 8, "group_size": 64, "desc_act": False,
                      "sym": True},
    "ct-w4a16-g32": _ct_group(4, "int", 32, "group", ["lm_head", "re:.*self_attn.*"],
                              "pack-quantized"),
    "ct-w4a16-g128": _ct_group(4, "int", 128, "group", ["lm_head"], "pack-quantized"),
    "ct-w8a8-fp8-channel": _ct_group(8, "float", None, "channel", ["lm_head"],
                                     "float-quantized", _FP8_DYNAMIC_INPUTS),
    "ct-w8a8-fp8-tensor": _ct_group(8, "float", None, "tensor", ["lm_head"],
                                    "float-quantized", _FP8_DYNAMIC_INPUTS),
    "ct-nvfp4": _ct_group(4, "float", 16, "tensor_group", ["lm_head"],
                          "nvfp4-pack-quantized", _NVFP4_INPUTS),
    "modelopt-fp8": {"quant_method": "modelopt",
                     "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None,
                                      "exclude_modules": ["lm_head"]}},
    "modelopt-nvfp4": {"quant_method": "modelopt",
                       "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None,
                                        "group_size": 16, "exclude_modules": ["lm_head"]}},
}
"""Checkpoint ``quantization_config`` blocks, each of the shape its producer writes
(AutoAWQ, AutoGPTQ, llm-compressor, ModelOpt, DeepSeek-style block FP8)."""

FLAGS = ("fp8", "fp8_per_tensor", "fp8_per_block", "fp8_per_channel")
"""``--quantization`` values tried on an unquantized checkpoint (online quantization)."""


def quant_configs() -> list[dict[str, Any]]:
    """``{"id", "config", "engine_args"}`` rows."""
    rows: list[dict[str, Any]] = []
    for name, qc in SCHEMES.items():
        rows.append({"id": f"llama-{name}", "config": {**_LLAMA, "quantization_config": qc},
                     "engine_args": {}})
    moe = ("fp8-tensor-dynamic", "fp8-block", "fp8-block-not-converted", "ct-w4a16-g32",
           "ct-w8a8-fp8-channel", "ct-nvfp4", "modelopt-fp8", "modelopt-nvfp4")
    for name in moe:
        rows.append({"id": f"qwen3_moe-{name}",
                     "config": {**_QWEN3_MOE, "quantization_config": SCHEMES[name]},
                     "engine_args": {}})
    for name in ("fp8-tensor-dynamic", "fp8-block"):
        rows.append({"id": f"mixtral-{name}",
                     "config": {**_MIXTRAL, "quantization_config": SCHEMES[name]},
                     "engine_args": {}})
    rows.append({"id": "gpt_oss-mxfp4",
                 "config": {**_GPT_OSS, "quantization_config": {
                     "quant_method": "mxfp4", "modules_to_not_convert": _MXFP4_NOT_CONVERTED}},
                 "engine_args": {}})
    rows.append({"id": "gpt_oss-bf16", "config": dict(_GPT_OSS), "engine_args": {}})
    for flag in FLAGS:
        for base, label in ((_LLAMA, "llama"), (_QWEN3_MOE, "qwen3_moe")):
            rows.append({"id": f"{label}-flag-{flag}", "config": dict(base),
                         "engine_args": {"quantization": flag}})
    return rows


def answer(row: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """vLLM's parameters for one row (tools/weights_oracle.py's answer, with the row's
    engine arguments), the quantization config class vLLM built, or vLLM's refusal."""
    import weights_oracle

    out = weights_oracle.answer(row, workdir)
    out["engine_args"] = row["engine_args"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True, help="a .jsonl.gz file")
    args = parser.parse_args(argv)
    oracle.start_models()
    record_answers(args.out, quant_configs(), answer,
                   lambda result: f"{len(result['parameters'])} parameters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
