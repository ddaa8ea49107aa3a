#!/usr/bin/env python3
"""vLLM's own defaults for a `vllm serve` deployment, asked of the release's code on
emulated GPUs (no GPU needed).

Run with an oracle interpreter (vLLM installed, CPU only), once per release::

    ORACLE_DIR=/work/oracle /work/.venvs/oracle-0.33.0/bin/python tools/defaults_oracle.py \\
        --out tests/golden/oracle/vllm-0.33.0/defaults.jsonl.gz

One answer line per row of the grid:

* ``batch`` rows: every device of ``schemas/devices.yaml`` (its ``nvidia-smi`` name, the
  total memory CUDA reports from ``schemas/device-memory.yaml`` or else its catalog
  memory, its capability) and synthetic devices at vLLM's thresholds. The GPU is the
  oracle's emulated CUDA platform (the harness's ``oracle.start`` / ``oracle.emulate``);
  ``get_device_name`` and ``get_device_total_memory`` are made to answer the row's name
  and memory. Recorded: ``EngineArgs.get_batch_defaults`` (vllm/engine/arg_utils.py),
  the defaults of ``max_num_batched_tokens`` / ``max_num_seqs`` per usage context.
* one ``engine`` row: ``CacheConfig.gpu_memory_utilization``'s default and the default
  ``cudagraph_mode`` (the optimization level's, ``OPTIMIZATION_LEVEL_TO_CONFIG`` in
  vllm/config/vllm.py, or ``CompilationConfig``'s own default where a release has no
  levels).
* ``capture`` rows: the CUDA-graph capture sizes vLLM's unmodified
  ``VllmConfig._set_cudagraph_sizes`` computes for a grid of ``max_num_seqs`` /
  ``max_num_batched_tokens`` on an SM90 and an SM100 GPU (no speculative decoding).

Nothing here decides an answer: tests/golden/test_engine_defaults.py compares the
engine profiles' ``defaults.yaml`` with these records.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import types
from pathlib import Path
from typing import Any

import oracle
import yaml
from startup_fact_grid import record_answers

REPO = oracle.REPO

GIB = 1024**3

SYNTHETIC: tuple[dict[str, Any], ...] = (
    {"id": "synthetic-69.99gib", "name": "NVIDIA Test GPU", "memory_gib": 69.99, "capability": "9.0"},
    {"id": "synthetic-70gib", "name": "NVIDIA Test GPU", "memory_gib": 70.0, "capability": "9.0"},
    {"id": "synthetic-159.99gib", "name": "NVIDIA Test GPU", "memory_gib": 159.99, "capability": "10.0"},
    {"id": "synthetic-160gib", "name": "NVIDIA Test GPU", "memory_gib": 160.0, "capability": "10.0"},
    {"id": "synthetic-a100-96gib", "name": "NVIDIA A100 96GB", "memory_gib": 96.0, "capability": "8.0"},
    {"id": "synthetic-a100-192gib", "name": "NVIDIA A100 192GB", "memory_gib": 192.0, "capability": "8.0"},
    {"id": "synthetic-gb10-128gib", "name": "NVIDIA GB10", "memory_gib": 119.7, "capability": "12.1"},
    {"id": "synthetic-sm121-200gib", "name": "NVIDIA Test GPU", "memory_gib": 200.0, "capability": "12.1"},
    {"id": "synthetic-sm120-128gib", "name": "NVIDIA Test GPU", "memory_gib": 128.0, "capability": "12.0"},
)
"""Devices at vLLM's thresholds: 70 and 160 GiB, the A100 name test, GB10's capability."""

CAPTURE_SEQS = (1, 3, 8, 100, 128, 255, 256, 300, 512, 1024)
CAPTURE_TOKENS = (16, 2048, 8192)
CAPTURE_CAPABILITIES = ("9.0", "10.0")


def cuda_name(device: dict[str, Any]) -> str:
    """The name CUDA reports for a catalog device (its ``NVIDIA ...`` alias, else
    ``NVIDIA <name>``)."""
    for alias in device.get("aliases") or ():
        if str(alias).startswith("NVIDIA "):
            return str(alias)
    return f"NVIDIA {device['name']}"


def batch_rows() -> list[dict[str, Any]]:
    devices = yaml.safe_load((REPO / "schemas/devices.yaml").read_text(encoding="utf-8"))
    measured = yaml.safe_load((REPO / "schemas/device-memory.yaml").read_text(encoding="utf-8"))
    totals = {str(k): float(v["total_gib"]) for k, v in (measured.get("devices") or {}).items()}
    rows = [{"id": f"device-{d['name']}", "kind": "batch", "device": d["name"],
             "name": cuda_name(d), "memory_gib": totals.get(d["name"], float(d["memory_gib"])),
             "capability": str(d["capability"])}
            for d in devices["devices"]]
    rows += [{**row, "kind": "batch", "device": None} for row in SYNTHETIC]
    return rows


def capture_rows() -> list[dict[str, Any]]:
    return [{"id": f"capture-sm{cc.replace('.', '')}-seqs{seqs}-tokens{tokens}", "kind": "capture",
             "capability": cc, "max_num_seqs": seqs, "max_num_batched_tokens": tokens}
            for cc in CAPTURE_CAPABILITIES for seqs in CAPTURE_SEQS for tokens in CAPTURE_TOKENS]


def _batch(row: dict[str, Any]) -> dict[str, Any]:
    from vllm.engine.arg_utils import EngineArgs

    memory = int(row["memory_gib"] * GIB)
    oracle.emulate(row["capability"], name=row["name"], memory_bytes=memory)
    method = EngineArgs.get_batch_defaults
    args = (1,) if "world_size" in inspect.signature(method).parameters else ()
    tokens, seqs = method(*args)
    return {"memory_bytes": memory,
            "max_num_batched_tokens": {str(getattr(k, "name", k)): v for k, v in tokens.items()},
            "max_num_seqs": {str(getattr(k, "name", k)): v for k, v in seqs.items()}}


def _engine() -> dict[str, Any]:
    from vllm.config import CacheConfig, CompilationConfig, VllmConfig

    utilization = CacheConfig.__dataclass_fields__["gpu_memory_utilization"].default
    utilization = getattr(utilization, "default", utilization)  # a pydantic Field
    level_field = VllmConfig.__dataclass_fields__.get("optimization_level")
    if level_field is not None:
        from vllm.config import vllm as vllm_config

        table = vllm_config.OPTIMIZATION_LEVEL_TO_CONFIG[level_field.default]
        mode = table["compilation_config"]["cudagraph_mode"]
        where = f"OPTIMIZATION_LEVEL_TO_CONFIG[{level_field.default.name}]"
    else:
        mode = CompilationConfig().cudagraph_mode
        where = "CompilationConfig()"
    return {"gpu_memory_utilization": utilization, "cudagraph_mode": mode.name,
            "cudagraph_mode_from": where}


def _capture(row: dict[str, Any]) -> dict[str, Any]:
    from vllm.config import CompilationConfig, VllmConfig
    from vllm.config.compilation import CUDAGraphMode

    oracle.emulate(row["capability"], name="NVIDIA Test GPU", memory_bytes=80 * GIB)
    fields = VllmConfig.__dataclass_fields__
    config = types.SimpleNamespace(
        model_config=types.SimpleNamespace(enforce_eager=False),
        compilation_config=CompilationConfig(cudagraph_mode=CUDAGraphMode.FULL_AND_PIECEWISE),
        scheduler_config=types.SimpleNamespace(
            max_num_seqs=row["max_num_seqs"], max_num_batched_tokens=row["max_num_batched_tokens"]),
        speculative_config=None, uniform_decode_query_len=1, num_speculative_tokens=0,
        performance_mode=fields["performance_mode"].default if "performance_mode" in fields else None,
        parallel_config=types.SimpleNamespace(tensor_parallel_size=1, pipeline_parallel_size=1,
                                              data_parallel_size=1),
    )
    VllmConfig._set_cudagraph_sizes(config)
    sizes = list(config.compilation_config.cudagraph_capture_sizes)
    return {"cudagraph_capture_sizes": sizes,
            "max_cudagraph_capture_size": config.compilation_config.max_cudagraph_capture_size}


def answer(row: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """vLLM's answer for one grid row (or the error vLLM raised)."""
    import vllm

    out: dict[str, Any] = {**row, "vllm_version": vllm.__version__}
    asker = {"batch": _batch, "engine": lambda _row: _engine(), "capture": _capture}[row["kind"]]
    try:
        out.update(asker(row))
    except Exception as exc:  # vLLM's refusal is an answer too, never a default
        out["status"] = "error"
        out["error"] = f"{type(exc).__name__}: {exc}"[:1000]
        return out
    out["status"] = "ok"
    return out


def _summary(result: dict[str, Any]) -> object:
    if result["kind"] == "batch":
        return (result["max_num_batched_tokens"].get("OPENAI_API_SERVER"),
                result["max_num_seqs"].get("OPENAI_API_SERVER"))
    if result["kind"] == "capture":
        return f"{len(result['cudagraph_capture_sizes'])} sizes"
    return (result["gpu_memory_utilization"], result["cudagraph_mode"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True, help="a .jsonl.gz file")
    args = parser.parse_args(argv)
    oracle.start((9, 0))
    rows = [{"id": "engine", "kind": "engine"}, *batch_rows(), *capture_rows()]
    results = record_answers(args.out, rows, answer, _summary)
    return 0 if all(r["status"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
