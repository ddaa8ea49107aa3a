#!/usr/bin/env python3
"""Record vLLM's own answers for the TP / DCP shard check (the test fixture's source).

Run with the oracle interpreter (vLLM 0.33.0 and a CPU torch installed, no GPU)::

    /work/venvs/oracle-0.33.0/bin/python tools/parallel_oracle.py \\
        --out tests/fixtures/parallel/vllm-0.33.0-parallel.json

(without ``--out`` the answer is printed).

It calls vLLM's unmodified functions and writes what they return:

* ``get_dcp_local_seq_lens`` (``vllm/v1/attention/backends/utils.py``) over a grid of
  sequence lengths, DCP sizes, ranks and interleave sizes;
* ``_lse_weighted_combine`` (``vllm/v1/attention/ops/dcp.py``, vLLM's CPU reference of
  the DCP combine) on seeded partial outputs and LSEs, in base e and base 2, with
  empty shards (-inf) among them; the inputs are written too;
* ``ModelConfig.get_num_kv_heads`` (KV heads per TP rank) and
  ``ModelConfig.verify_with_parallel_config`` (the GQA limits on DCP: the error text,
  or null) over a grid of head counts and TP / DCP sizes, on duck-typed configs;
* where ``is_lse_base_on_e`` is set for the FlashAttention and FlashInfer backends
  (the DCP combine's LSE base), from the installed source text, with line numbers.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from types import SimpleNamespace
from typing import Any

import oracle
import torch
import vllm
from vllm.config.model import ModelConfig
from vllm.v1.attention.backends import flash_attn, flashinfer
from vllm.v1.attention.backends.utils import get_dcp_local_seq_lens
from vllm.v1.attention.ops.dcp import _lse_weighted_combine


def local_seq_lens() -> list[dict[str, Any]]:
    seq_lens = torch.arange(0, 70)
    rows = []
    for dcp in (1, 2, 3, 4, 8):
        for interleave in (1, 2, 4, 16):
            for rank in range(dcp):
                values = get_dcp_local_seq_lens(seq_lens, dcp, rank, interleave)
                rows.append({"dcp": dcp, "interleave": interleave, "rank": rank,
                             "local": [int(v) for v in values.tolist()]})
    return rows


def combines() -> list[dict[str, Any]]:
    generator = torch.Generator().manual_seed(17)
    cases = []
    for ranks, base_e in ((2, True), (4, True), (2, False), (4, False), (3, False)):
        outputs = torch.randn(ranks, 3, 2, 4, generator=generator)
        lses = torch.randn(ranks, 3, 2, generator=generator) * 3
        lses[ranks - 1, 0, :] = float("-inf")  # an empty shard
        result, lse = _lse_weighted_combine(outputs, lses, return_lse=True,
                                            is_lse_base_on_e=base_e)
        cases.append({"base": "e" if base_e else "2", "outputs": outputs.tolist(),
                      "lses": [[[v if v != float("-inf") else "-inf" for v in row]
                                for row in rank] for rank in lses.tolist()],
                      "result": result.tolist(), "lse": lse.tolist()})
    return cases


def heads() -> list[dict[str, Any]]:
    rows = []
    for num_heads, num_kv_heads in ((32, 8), (64, 8), (32, 2), (32, 4), (8, 1), (16, 16)):
        for tp in (1, 2, 4, 8, 16):
            if num_heads % tp:
                continue
            for dcp in (1, 2, 4, 8):
                if tp % dcp:
                    continue
                arch = SimpleNamespace(total_num_attention_heads=num_heads,
                                       total_num_kv_heads=num_kv_heads)
                model = SimpleNamespace(
                    model_arch_config=arch, use_mla=False, multimodal_config=None,
                    get_total_num_kv_heads=lambda arch=arch: arch.total_num_kv_heads)
                parallel = SimpleNamespace(
                    enable_hc_sp=False, tensor_parallel_size=tp, enable_expert_parallel=False,
                    pipeline_parallel_size=1, decode_context_parallel_size=dcp,
                    world_size_across_dp=tp)
                try:
                    ModelConfig.verify_with_parallel_config(model, parallel)  # type: ignore[arg-type]
                    error = None
                except ValueError as exc:
                    error = str(exc)
                rows.append({
                    "num_heads": num_heads, "num_kv_heads": num_kv_heads, "tp": tp, "dcp": dcp,
                    "kv_heads_per_rank": ModelConfig.get_num_kv_heads(model, parallel),  # type: ignore[arg-type]
                    "error": error})
    return rows


def lse_sources() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for backend, module in (("FLASH_ATTN", flash_attn), ("FLASHINFER", flashinfer)):
        lines, _ = inspect.getsourcelines(module)
        hits = [(number + 1, line.strip()) for number, line in enumerate(lines)
                if "self.dcp_combine = " in line or "self._dcp_combine = " in line]
        bases = set()
        for _, text in hits:
            flag = re.search(r"is_lse_base_on_e=(True|False)", text)
            bases.add("e" if flag is None or flag.group(1) == "True" else "2")
        found[backend] = {"file": module.__name__.replace(".", "/") + ".py",
                          "lines": [n for n, _ in hits], "code": [t for _, t in hits],
                          "lse_base": bases.pop() if len(bases) == 1 else sorted(bases)}
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = json.dumps({"vllm_version": vllm.__version__, "get_dcp_local_seq_lens": local_seq_lens(),
                       "lse_weighted_combine": combines(), "heads": heads(),
                       "dcp_combine_lse_base": lse_sources()}) + "\n"
    if args[:1] in (["--out"], ["-o"]) and len(args) == 2:
        oracle.write_bytes(args[1], text.encode("utf-8"))  # vLLM's logging never reaches the file
    elif args:
        sys.stderr.write("usage: parallel_oracle.py [--out FILE]\n")
        return 2
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
