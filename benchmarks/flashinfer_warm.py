"""Compile FlashInfer's JIT kernels ahead of use (run in the background on the GPU machine).

FlashInfer builds each kernel variant on first use (decode ~11 s, SM90 prefill ~90 s).
This plans a decode and a prefill wrapper for the variants the bench, the smoke check
and the GPU tests use (GQA 32/8, head 128, bf16; plain, and sliding window + soft-cap),
so the compiles overlap other work. FlashInfer guards each build with a file lock, so a
process that needs a kernel while it is being built waits for it instead of rebuilding.

Usage: python benchmarks/flashinfer_warm.py
"""

from __future__ import annotations

import time


def main() -> None:
    import flashinfer
    import torch

    device = torch.device("cuda")
    int32 = torch.int32
    for window_left, soft_cap in ((-1, None), (23, 2.0)):
        for kind in ("decode", "prefill"):
            started = time.perf_counter()
            workspace = torch.zeros(128 << 20, dtype=torch.uint8, device=device)
            indptr = torch.tensor([0, 2], dtype=int32)
            indices = torch.tensor([1, 2], dtype=int32)
            last = torch.tensor([5], dtype=int32)
            shared = {"window_left": window_left, "logits_soft_cap": soft_cap,
                      "q_data_type": torch.bfloat16, "kv_data_type": torch.bfloat16,
                      "sm_scale": 128 ** -0.5}
            if kind == "decode":
                wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD")
                wrapper.plan(indptr, indices, last, 32, 8, 128, 16, **shared)
            else:
                wrapper = flashinfer.BatchPrefillWithPagedKVCacheWrapper(workspace, "NHD",
                                                                         backend="auto")
                wrapper.plan(torch.tensor([0, 21], dtype=int32), indptr, indices, last, 32, 8,
                             128, 16, causal=True, **shared)
            print(f"warm {kind} window_left={window_left} soft_cap={soft_cap}: "
                  f"{time.perf_counter() - started:.1f} s", flush=True)


if __name__ == "__main__":
    main()
