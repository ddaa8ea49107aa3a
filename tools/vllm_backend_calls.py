#!/usr/bin/env python3
"""Record the kernel calls vLLM's own backend classes make for the smoke's plans (CPU).

Run with an oracle interpreter (vLLM installed, CPU only), once per release::

    ORACLE_EXTRA_PATH=/work/oracle-extra ORACLE_DIR=/work/oracle \\
        /work/.venvs/oracle-0.25.1/bin/python tools/vllm_backend_calls.py \\
        --out tests/golden/vllm_backend_calls/vllm-0.25.1.json

vLLM is imported as on a CUDA GPU of capability 9.0 (``tools/vllm_model_reference.py``
``_bootstrap``). For every plan in :data:`PLANS` the smoke runs through its runner with the
plan's provider forced to vLLM's backend classes (``vllm.backend_classes``,
selector/smoke/backend_classes.py): vLLM's config, its ``Attention`` / ``MLAAttention``
layers, the backend's ``get_kv_cache_shape`` cache, ``builder.build(0, common)`` and
``impl.forward`` / ``forward_mqa`` all run unmodified. Only the GPU kernels the impl
launches are replaced, by recorders that keep every argument vLLM hands them and compute
the result with the torch double of ``tests/smoke/paged_torch.py`` (so the runner's
reference check runs too):

* TRITON_ATTN: ``triton_reshape_and_cache_flash`` and ``unified_attention``
  (vllm/v1/attention/backends/triton_attn.py);
* TRITON_MLA: ``decode_attention_fwd`` (vllm/v1/attention/backends/mla/triton_mla.py);
* FLASH_ATTN: ``reshape_and_cache_flash``, ``get_scheduler_metadata`` and
  ``flash_attn_varlen_func`` (vllm/v1/attention/backends/flash_attn.py).

A CPU has no CUDA graphs: a full-graph plan's decode-graph check runs its launch eagerly
at capture and at each replay (:func:`_eager_graphs`). Each plan of :data:`BUG_RUNS` runs
again with each of its kernel bugs injected into the torch double (its status recorded).

Each recorded call is written structurally: a tensor as its shape, dtype and (small
integer or scale tensors) its values, a scalar as itself. tests/smoke/test_vllm_backend_calls.py
compares the contract path's calls for the same plans with these records. Nothing here
decides an answer: a failure of the harness writes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))

LAYERS = 2
SEED = 0
PLANS: list[dict[str, Any]] = [
    {"name": "fa3-window-softcap", "backend": "FLASH_ATTN", "fa_version": 3,
     "kernel_block_size": 16, "num_q_heads": 32, "num_kv_heads": 8, "head_size": 128,
     "sliding_window": 200, "logits_soft_cap": 30.0, "cudagraph_mode": "FULL_AND_PIECEWISE"},
    {"name": "fa3-fp8", "backend": "FLASH_ATTN", "fa_version": 3, "kernel_block_size": 16,
     "num_q_heads": 32, "num_kv_heads": 8, "head_size": 128, "kv_cache_dtype": "fp8",
     "k_scale": 0.5, "v_scale": 2.0, "cudagraph_mode": "FULL_AND_PIECEWISE"},
    {"name": "fa3-sinks", "backend": "FLASH_ATTN", "fa_version": 3, "kernel_block_size": 16,
     "num_q_heads": 64, "num_kv_heads": 8, "head_size": 64, "sliding_window": 128,
     "has_sinks": True, "cudagraph_mode": "PIECEWISE"},
    {"name": "triton-head256-window", "backend": "TRITON_ATTN", "kernel_block_size": 16,
     "num_q_heads": 16, "num_kv_heads": 8, "head_size": 256, "sliding_window": 1024,
     "cudagraph_mode": "FULL_AND_PIECEWISE"},
    {"name": "triton-softcap-sinks", "backend": "TRITON_ATTN", "kernel_block_size": 16,
     "num_q_heads": 8, "num_kv_heads": 2, "head_size": 64, "sliding_window": 50,
     "logits_soft_cap": 30.0, "has_sinks": True},
    {"name": "triton-fp8", "backend": "TRITON_ATTN", "kernel_block_size": 16,
     "num_q_heads": 32, "num_kv_heads": 8, "head_size": 128, "kv_cache_dtype": "fp8",
     "k_scale": 0.5, "v_scale": 2.0},
    {"name": "triton-mla", "backend": "TRITON_MLA", "kernel_block_size": 16,
     "num_q_heads": 16, "num_kv_heads": 1, "head_size": 576, "kv_lora_rank": 512,
     "qk_rope_head_dim": 64, "softmax_scale": 0.07216878364870322,
     "cudagraph_mode": "FULL_AND_PIECEWISE"},
]
"""The plans recorded (the engine is the interpreter's vLLM)."""

BUG_RUNS: dict[str, list[str]] = {
    "triton-softcap-sinks": ["ignore_window", "ignore_softcap", "ignore_sinks", "wrong_page",
                             "drop_key"],
    "triton-fp8": ["wrong_scale"],
    "triton-mla": ["wrong_page", "drop_key"],
    "fa3-sinks": ["ignore_sinks", "wrong_page"],
}
"""Kernel bugs (``tests/smoke/paged_torch.BUGS``) injected into the recorders' torch double
for these plans: the smoke through vLLM's classes must FAIL on each."""

SMALL = 8192
"""Integer tensors up to this many elements are recorded with their values."""


def describe(torch: Any, value: Any) -> Any:
    """A kernel argument as JSON: tensors by shape, dtype and (small ones) values."""
    if isinstance(value, torch.Tensor):
        out: dict[str, Any] = {"shape": list(value.shape), "dtype": str(value.dtype)}
        if not value.is_floating_point() and value.numel() <= SMALL:
            out["values"] = value.reshape(-1).tolist()
        elif value.is_floating_point() and value.numel() <= 64 and \
                value.dtype in (torch.float32, torch.float16, torch.bfloat16):
            out["values"] = [float(v) for v in value.reshape(-1).tolist()]
        return out
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, tuple | list):
        return [describe(torch, item) for item in value]
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if hasattr(value, "value") and hasattr(value, "name"):  # an enum
        return f"{type(value).__name__}.{value.name}"
    return repr(value)


class Recorder:
    """The calls of one plan's first layer (the runner calls each layer once first)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.calls: dict[str, dict[str, Any]] = {}

    def keep(self, name: str, arguments: dict[str, Any]) -> None:
        if name not in self.calls:
            self.calls[name] = {key: describe(self.torch, value)
                                for key, value in arguments.items()}


def install(torch: Any, recorder: Recorder) -> None:
    """Replace the kernels the impls launch with recorders computing the torch double."""
    from vllm.v1.attention.backends import flash_attn, triton_attn
    from vllm.v1.attention.backends.mla import triton_mla

    from tests.smoke import paged_torch

    def write(key: Any, value: Any, key_cache: Any, value_cache: Any, slot_mapping: Any,
              k_scale: float, v_scale: float) -> None:
        block = key_cache.shape[1]
        slots = slot_mapping.long()
        keep = slots >= 0
        slots = slots[keep]
        pages, offsets = torch.div(slots, block, rounding_mode="floor"), slots % block
        key_cache[pages, offsets] = (key[keep].float() / k_scale).to(key_cache.dtype)
        value_cache[pages, offsets] = (value[keep].float() / v_scale).to(value_cache.dtype)

    def cache_writer(op: str) -> Any:
        """vLLM's cache-write op ``op`` as the backend calls it: recorded, then done."""
        def cache_write(key: Any, value: Any, key_cache: Any, value_cache: Any,
                        slot_mapping: Any, kv_cache_dtype: str, k_scale: Any, v_scale: Any
                        ) -> None:
            recorder.keep(op, {
                "key": key, "value": value, "key_cache": key_cache, "value_cache": value_cache,
                "slot_mapping": slot_mapping, "kv_cache_dtype": kv_cache_dtype,
                "k_scale": k_scale, "v_scale": v_scale})
            write(key, value, key_cache, value_cache, slot_mapping, float(k_scale), float(v_scale))
        return cache_write

    def attend(**kw: Any) -> Any:
        return paged_torch.flash_attn_varlen_func(
            q=kw["q"], k=kw["k"], v=kw["v"], cu_seqlens_q=kw["cu_seqlens_q"],
            max_seqlen_q=kw["max_seqlen_q"], seqused_k=kw["seqused_k"],
            max_seqlen_k=kw["max_seqlen_k"], softmax_scale=kw["softmax_scale"],
            causal=kw["causal"], block_table=kw["block_table"],
            window_size=list(kw["window_size"]), softcap=kw.get("softcap") or 0.0,
            q_descale=kw.get("q_descale"), k_descale=kw.get("k_descale"),
            v_descale=kw.get("v_descale"), s_aux=kw.get("sinks", kw.get("s_aux")))

    def unified_attention(**kw: Any) -> None:
        recorder.keep("unified_attention", kw)
        kw["out"].copy_(attend(**kw).to(kw["out"].dtype))

    def flash_attn_varlen_func(**kw: Any) -> Any:
        recorder.keep("flash_attn_varlen_func", kw)
        kw["out"].copy_(attend(**kw).to(kw["out"].dtype))
        return kw["out"]

    def get_scheduler_metadata(**kw: Any) -> Any:
        recorder.keep("get_scheduler_metadata", kw)
        return paged_torch.get_scheduler_metadata(**kw)

    def decode_attention_fwd(q: Any, kv_buffer: Any, v_buffer: Any, o: Any, lse: Any,
                             req_to_token: Any, b_seq_len: Any, attn_logits: Any,
                             num_kv_splits: int, sm_scale: float, page_size: int,
                             k_scale: Any = None, v_scale: Any = None, is_mla: bool = False
                             ) -> None:
        recorder.keep("decode_attention_fwd", {
            "q": q, "kv_buffer": kv_buffer, "v_buffer": v_buffer, "o": o, "lse": lse,
            "req_to_token": req_to_token, "b_seq_len": b_seq_len, "attn_logits": attn_logits,
            "num_kv_splits": num_kv_splits, "sm_scale": sm_scale, "page_size": page_size,
            "k_scale": k_scale, "v_scale": v_scale, "is_mla": is_mla})
        rank = v_buffer.shape[-1]
        batch = q.shape[0]
        result = paged_torch.flash_attn_varlen_func(
            q=q[..., rank:], k=kv_buffer[..., rank:], v=kv_buffer[..., :rank],
            q_v=q[..., :rank], cu_seqlens_q=torch.arange(batch + 1, dtype=torch.int32),
            max_seqlen_q=1, seqused_k=b_seq_len, max_seqlen_k=0, softmax_scale=sm_scale,
            causal=True, window_size=[-1, -1], block_table=req_to_token, softcap=0.0,
            k_descale=k_scale, v_descale=v_scale)
        o.copy_(result.to(o.dtype))

    _eager_graphs(torch)
    triton_attn.triton_reshape_and_cache_flash = cache_writer("triton_reshape_and_cache_flash")
    triton_attn.unified_attention = unified_attention
    flash_attn.reshape_and_cache_flash = cache_writer("reshape_and_cache_flash")
    flash_attn.flash_attn_varlen_func = flash_attn_varlen_func
    flash_attn.get_scheduler_metadata = get_scheduler_metadata
    triton_mla.decode_attention_fwd = decode_attention_fwd
    triton = triton_mla.triton
    if not hasattr(triton, "next_power_of_2"):  # the CPU install's Triton placeholder
        triton.next_power_of_2 = lambda n: 1 << max(0, (int(n) - 1).bit_length())


def _eager_graphs(torch: Any) -> None:
    """A CPU has no CUDA graphs: capture runs the launch once, each replay runs it again
    into the captured output (the decode-graph harness's loading and checks run as on a
    GPU)."""
    import contextlib

    from selector.smoke import graphs

    harness_cls = graphs._VllmClassesHarness
    if getattr(harness_cls, "_eager", False):
        return
    launch, init = harness_cls.launch, harness_cls.__init__
    current: list[Any] = []

    def eager_launch(self: Any) -> Any:
        output = launch(self)
        if not hasattr(self, "_captured"):
            self._captured = output
        else:
            self._captured.copy_(output)
        return self._captured

    def remember(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        current[:] = [self]

    class EagerGraph:
        def replay(self) -> None:
            current[0].launch()

    harness_cls.launch = eager_launch
    harness_cls.__init__ = remember
    harness_cls._eager = True
    torch.cuda.CUDAGraph = EagerGraph
    torch.cuda.graph = lambda graph: contextlib.nullcontext()
    torch.cuda.synchronize = lambda: None


def record(plan_data: dict[str, Any], version: str) -> dict[str, Any]:
    """The plan's record, and its status with each of its :data:`BUG_RUNS` injected."""
    from tests.smoke import paged_torch

    result = _run(plan_data, version)
    bugs = {}
    for bug in BUG_RUNS.get(plan_data["name"], []):
        paged_torch.BUGS.clear()
        paged_torch.BUGS.add(bug)
        try:
            bugs[bug] = _run(plan_data, version)["status"]
        finally:
            paged_torch.BUGS.clear()
    if bugs:
        result["injected_bugs"] = bugs
    return result


def _run(plan_data: dict[str, Any], version: str) -> dict[str, Any]:
    import torch

    from selector.catalog import load_catalog
    from selector.smoke.contract import load_contract
    from selector.smoke.plan import SmokeOptions, bind_plan
    from selector.smoke.providers import ProviderChoice, _load
    from selector.smoke.runner import SmokeMachine, run_smoke

    plan = bind_plan(load_catalog(), engine=f"vllm=={version}", **plan_data)
    spec = next(s for s in load_contract(plan.kernel_calls).providers
                if s.id == "vllm.backend_classes")
    recorder = Recorder(torch)
    install(torch, recorder)
    machine = SmokeMachine(torch, torch.device("cpu"), "cpu (vLLM bootstrapped as CUDA sm_90)",
                           lambda _: ProviderChoice(_load(spec, torch)))
    report = run_smoke([plan], SmokeOptions(measure=False, layers=LAYERS, seed=SEED),
                       raise_on_failure=False, machine=machine)
    group = report.groups[0]
    return {"plan": plan.model_dump(mode="json"), "status": group.status,
            "implementation": group.implementation,
            "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail}
                       for c in group.checks],
            "calls": recorder.calls}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    import vllm_model_reference

    vllm_model_reference._bootstrap()
    import vllm

    version = str(vllm.__version__)
    records = []
    for plan in PLANS:
        result = record(plan, version)
        if result["status"] != "PASS" or not result["calls"]:
            print(f"HARNESS FAILURE {plan['name']}: {result['status']} "
                  f"{[c for c in result['checks'] if not c['passed']]}", file=sys.stderr)
            return 1
        print(f"{result['status']:5} {plan['name']}: {sorted(result['calls'])} "
              f"{result.get('injected_bugs', '')}", file=sys.stderr)
        records.append(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"vllm_version": version, "seed": SEED, "layers": LAYERS,
                                    "records": records}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({len(records)} plans)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    raise SystemExit(main())
