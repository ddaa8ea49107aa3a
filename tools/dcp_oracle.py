#!/usr/bin/env python3
"""Record vLLM's own start-up answer for decode-context-parallel (DCP) / TP splits.

Run with each release's oracle interpreter (vLLM and a CPU torch installed, no GPU)::

    /work/venvs/oracle-<version>/bin/python tools/dcp_oracle.py \\
        tests/golden/oracle/vllm-<version>/dcp.json.gz

It calls vLLM's unmodified code and writes what it raises, in the order ``vllm serve``
meets it: ``ParallelConfig``'s own check that the TP size divides by the DCP size
(``vllm/config/parallel.py``, the dataclass validation when the engine config is built;
with prefill context parallelism the DCP size must span the PCP or TP x PCP axis instead),
then ``ModelConfig.verify_with_parallel_config`` (``vllm/config/model.py``: attention heads
by TP, then the GQA limits on DCP), on duck-typed configs. Each row is one split:
``error`` is null (accepted) or ``{"type": <exception class>, "message": str(exc)}``.
The source lines of each check in the installed wheel are written too.

``kv_head_splits`` are the KV heads by the TP size, which vLLM's config accepts and its
model code refuses while the model is built: the unmodified ``LlamaAttention.__init__``
(``vllm/model_executor/models/llama.py``; Phi-3/4 and Mistral reuse it, and most model
files carry the same assertions) with ``get_tensor_model_parallel_world_size`` answering
the TP size, stopped at its first sub-layer (``QKVParallelLinear``: the checks are behind
it). A refusal is a bare assertion, so the row keeps the failing source line as the
traceback shows it (``file``, ``line``, ``source``).
"""

from __future__ import annotations

import inspect
import json
import sys
import traceback
from types import SimpleNamespace
from typing import Any

import oracle
import vllm
from vllm.config.model import ModelConfig
from vllm.config.parallel import ParallelConfig

# (total attention heads, total KV heads, use_mla)
MODELS = ((32, 8, False), (64, 8, False), (32, 2, False), (32, 4, False), (8, 1, False),
          (16, 16, False), (40, 8, False), (24, 8, False), (12, 4, False), (128, 128, True), (16, 1, True))
TPS = (1, 2, 3, 4, 6, 8, 12, 16)
DCPS = (1, 2, 3, 4, 8)
PCPS = (1, 2)  # prefill context parallelism changes the parallel config's DCP rule


def _error(exc: BaseException) -> dict[str, str]:
    return {"type": type(exc).__name__, "message": str(exc)}


def parallel_error(tp: int, pcp: int, dcp: int) -> dict[str, str] | None:
    try:
        ParallelConfig(tensor_parallel_size=tp, prefill_context_parallel_size=pcp,
                       decode_context_parallel_size=dcp)
    except Exception as exc:
        errors = getattr(exc, "errors", None)
        if callable(errors):  # pydantic ValidationError: the ValueError vLLM raised
            inner = errors()[0].get("ctx", {}).get("error")
            if isinstance(inner, BaseException):
                return _error(inner)
        return _error(exc)
    return None


def model_error(heads: int, kv_heads: int, use_mla: bool, tp: int, dcp: int
                ) -> dict[str, str] | None:
    arch = SimpleNamespace(total_num_attention_heads=heads, total_num_kv_heads=kv_heads)
    hf_text = SimpleNamespace(num_attention_heads=heads)
    model = SimpleNamespace(
        model_arch_config=arch, use_mla=use_mla, multimodal_config=None,
        hf_text_config=hf_text, architectures=["LlamaForCausalLM"],
        get_total_num_kv_heads=lambda: kv_heads)
    parallel = SimpleNamespace(
        enable_hc_sp=False, tensor_parallel_size=tp, enable_expert_parallel=False,
        pipeline_parallel_size=1, decode_context_parallel_size=dcp, world_size_across_dp=tp)
    try:
        ModelConfig.verify_with_parallel_config(model, parallel)  # type: ignore[arg-type]
    except (ValueError, AssertionError) as exc:
        return _error(exc)
    return None


# (total attention heads, total KV heads): the non-MLA models of the grid and Phi-4's 40 / 10
KV_MODELS = (*((h, kv) for h, kv, mla in MODELS if not mla), (40, 10), (48, 6))


class _Built(Exception):
    """LlamaAttention got past its head checks to its first sub-layer."""


def _stop(*_args: Any, **_kwargs: Any) -> None:
    raise _Built


def _relative(path: str) -> str:
    return "vllm/" + path.split("/vllm/", 1)[1]


def kv_head_error(heads: int, kv_heads: int, tp: int) -> dict[str, Any] | None:
    from vllm.model_executor.models import llama

    saved = llama.get_tensor_model_parallel_world_size, llama.QKVParallelLinear
    llama.get_tensor_model_parallel_world_size = lambda: tp  # type: ignore[assignment]
    llama.QKVParallelLinear = _stop  # type: ignore[assignment,misc]
    try:
        llama.LlamaAttention(config=SimpleNamespace(head_dim=128), hidden_size=128 * heads,
                             num_heads=heads, num_kv_heads=kv_heads,
                             prefix="model.layers.0.self_attn")
    except _Built:
        return None
    except AssertionError as exc:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return {**_error(exc), "file": _relative(frame.filename), "line": frame.lineno,
                "source": (frame.line or "").strip()}
    finally:
        llama.get_tensor_model_parallel_world_size, llama.QKVParallelLinear = saved
    raise AssertionError("LlamaAttention was built without its sub-layers")


def kv_head_rows() -> list[dict[str, Any]]:
    return [{"num_heads": heads, "num_kv_heads": kv_heads, "tp": tp,
             "error": kv_head_error(heads, kv_heads, tp)}
            for heads, kv_heads in KV_MODELS for tp in TPS if heads % tp == 0]


def rows() -> list[dict[str, Any]]:
    found = []
    for heads, kv_heads, use_mla in MODELS:
        for tp in TPS:
            for pcp in PCPS:
                for dcp in DCPS:
                    if dcp == 1 and tp == 1:
                        continue
                    error = parallel_error(tp, pcp, dcp) or model_error(
                        heads, kv_heads, use_mla, tp, dcp)
                    found.append({"num_heads": heads, "num_kv_heads": kv_heads,
                                  "use_mla": use_mla, "tp": tp, "pcp": pcp, "dcp": dcp,
                                  "error": error})
    return found


def sources() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, function in (("verify_with_parallel_config", ModelConfig.verify_with_parallel_config),
                           ("parallel_config", ParallelConfig)):
        lines, start = inspect.getsourcelines(function)
        hits = [start + n for n, line in enumerate(lines)
                if "decode_context_parallel" in line or "dcp" in line]
        found[name] = {"file": inspect.getsourcefile(function), "lines": hits}
    for entry in found.values():
        entry["file"] = "vllm/" + str(entry["file"]).split("/vllm/", 1)[1]
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: dcp_oracle.py OUT.json.gz\n")
        return 2
    text = json.dumps({"vllm_version": vllm.__version__, "splits": rows(),
                       "kv_head_splits": kv_head_rows(), "sources": sources()}, sort_keys=True)
    oracle.write_gz(argv[0], text + "\n")  # vLLM logs to stdout: the answers go to their own file
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
