"""The bench's decode numbers against raw CUDA-event loops (run on the GPU machine).

Decode batch 128 x 4096 (GQA 32/8, head 128, page 16, bf16), the kernels vLLM runs on
Hopper called directly, as vLLM calls them, without the tool's code: vLLM's FA3
(``torch.ops._vllm_fa3_C.fwd`` loaded from ``$VLLM_KERNELS_DIR``, with its ahead-of-time
schedule and 32 splits, as under FULL_AND_PIECEWISE graphs) and FlashInfer's decode
wrapper with tensor cores. Each is timed two ways: a plain loop between two events, and a
graph-replayed loop (launches captured in a CUDA graph, no host overhead: the fair
comparison for the bench's graph-replayed decode). Then the ratio of the bench's median
(from its bench.json, run in the same command) to each.

Usage: python benchmarks/bench_rawloop.py BENCH_JSON [--batch 128] [--context 4096]
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from smoke_bench import graph_loop  # noqa: E402 - the same loop as the smoke benchmark

from selector.bench.roofline import Geometry, shape_work  # noqa: E402
from selector.smoke.metadata import build_flash_attn_metadata, build_flashinfer_metadata  # noqa: E402
from selector.smoke.workload import uniform_decode_batch  # noqa: E402

HEADS, KV_HEADS, HEAD, BLOCK = 32, 8, 128, 16


def plain_loop(torch: Any, launch: Any, repeats: int = 100) -> float:
    for _ in range(5):
        launch()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        launch()
    end.record()
    torch.cuda.synchronize()
    return 1000.0 * start.elapsed_time(end) / repeats


def tool_medians(path: Path, name: str) -> dict[str, tuple[float, str]]:
    from selector.bench.measurements import load_measurements

    measurements = load_measurements(path)
    out = {}
    for result in measurements.results:
        summary = result.summary
        if result.shape_name == name and summary is not None:
            out[result.backend] = (summary.median, result.timing_mode)
    return out


def main() -> None:
    import torch

    args = sys.argv[1:]
    bench_json = Path(args[0]) if args and not args[0].startswith("--") else None
    batch = int(args[args.index("--batch") + 1]) if "--batch" in args else 128
    context = int(args[args.index("--context") + 1]) if "--context" in args else 4096
    device = torch.device("cuda")
    workload = uniform_decode_batch(BLOCK, batch, context, seed=1)
    spec = workload.batch
    generator = torch.Generator(device=device).manual_seed(3)
    pages = workload.num_pages
    queries = torch.randn(batch, HEADS, HEAD, device=device, generator=generator).bfloat16()
    work = shape_work([(r.context_len, r.query_len) for r in spec.requests],
                      Geometry(HEADS, KV_HEADS, HEAD))
    rows = []
    name = f"decode {batch}x{context // 1024}k" if context % 1024 == 0 else f"decode {batch}x{context}"
    tool = tool_medians(bench_json, name) if bench_json and bench_json.is_file() else {}

    # vLLM's FA3: cache (2, pages, block, kv_heads, head), NHD, bound by keyword
    torch.ops.load_library(str(Path(os.environ["VLLM_KERNELS_DIR"]) / "_vllm_fa3_C.abi3.so"))
    fa3 = torch.ops._vllm_fa3_C
    cache = torch.randn(2, pages, BLOCK, KV_HEADS, HEAD, device=device,
                        generator=generator).bfloat16()
    meta = build_flash_attn_metadata(spec)
    width = max(len(r) for r in meta.block_table)
    table = torch.tensor([r + [0] * (width - len(r)) for r in meta.block_table],
                         dtype=torch.int32, device=device)
    cu_q = torch.tensor(meta.cu_seqlens_q, dtype=torch.int32, device=device)
    seqused = torch.tensor(meta.seqused_k, dtype=torch.int32, device=device)
    splits = 32  # flash_attn_max_num_splits_for_cuda_graph
    schedule = fa3.get_scheduler_metadata(
        batch_size=batch, max_seqlen_q=1, max_seqlen_k=meta.max_k, num_heads=HEADS,
        num_heads_k=KV_HEADS, headdim=HEAD, headdim_v=HEAD, qkv_dtype=torch.bfloat16,
        seqused_k=seqused, cu_seqlens_q=cu_q, cu_seqlens_k=None, cu_seqlens_k_new=None,
        seqused_q=None, leftpad_k=None, page_size=BLOCK, max_seqlen_k_new=0, is_causal=True,
        window_size_left=-1, window_size_right=-1, has_softcap=False, num_splits=splits,
        pack_gqa=None, sm_margin=0)
    fa_out = torch.empty_like(queries)
    none = dict.fromkeys(["k_new", "v_new", "q_v", "cu_seqlens_k", "cu_seqlens_k_new",
                          "seqused_q", "kv_batch_idx", "leftpad_k", "rotary_cos",
                          "rotary_sin", "seqlens_rotary", "q_descale", "k_descale",
                          "v_descale", "pack_gqa", "s_aux", "cp_tot_seqused_k"])

    def fa_launch() -> object:
        return fa3.fwd(q=queries, k=cache[0], v=cache[1], out=fa_out, cu_seqlens_q=cu_q,
                       seqused_k=seqused, max_seqlen_q=1, max_seqlen_k=meta.max_k,
                       page_table=table, softmax_scale=1 / math.sqrt(HEAD), is_causal=True,
                       window_size_left=-1, window_size_right=-1, softcap=0.0,
                       is_rotary_interleaved=True, scheduler_metadata=schedule,
                       num_splits=splits, sm_margin=0, cp_world_size=1, cp_rank=0, **none)

    rows.append(("FLASH_ATTN", "vLLM FA3 _vllm_fa3_C", plain_loop(torch, fa_launch),
                 graph_loop(torch, fa_launch, replays=10)))
    del cache
    torch.cuda.empty_cache()

    # FlashInfer: cache (pages, 2, block, kv_heads, head), NHD
    import flashinfer

    cache = torch.randn(pages, 2, BLOCK, KV_HEADS, HEAD, device=device,
                        generator=generator).bfloat16()
    fmeta = build_flashinfer_metadata(spec)
    workspace = torch.zeros(128 << 20, dtype=torch.uint8, device=device)
    wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD",
                                                            use_tensor_cores=True)
    wrapper.plan(torch.tensor(fmeta.paged_kv_indptr, dtype=torch.int32),
                 torch.tensor(fmeta.paged_kv_indices, dtype=torch.int32),
                 torch.tensor(fmeta.paged_kv_last_page_len, dtype=torch.int32),
                 HEADS, KV_HEADS, HEAD, BLOCK, q_data_type=torch.bfloat16,
                 kv_data_type=torch.bfloat16, sm_scale=1 / math.sqrt(HEAD))
    out = torch.empty_like(queries)

    def fi_launch() -> object:
        return wrapper.run(queries, cache, out=out)

    rows.append(("FLASHINFER", f"FlashInfer {flashinfer.__version__} TC decode",
                 plain_loop(torch, fi_launch), graph_loop(torch, fi_launch, replays=10)))

    print(f"raw loops, {name} (KV read {work.kv_bytes / 1e9:.2f} GB), "
          f"{torch.cuda.get_device_name(0)}")
    print(f"{'backend':11s} {'library':28s} {'plain loop':>12s} {'graph loop':>12s} "
          f"{'tool (bench)':>16s} {'tool/graph':>10s} {'tool/plain':>10s}")
    for backend, label, plain, graph in rows:
        median, mode = tool.get(backend, (float("nan"), "-"))
        tbps = work.kv_bytes / (graph * 1e-6) / 1e12
        print(f"{backend:11s} {label:28s} {plain:9.1f} us {graph:9.1f} us "
              f"{median:9.1f} us {mode:5s} {median / graph:10.3f} {median / plain:10.3f}"
              f"   (graph loop {tbps:.2f} TB/s)")
    print(json.dumps({"rows": [{"backend": b, "plain_us": p, "graph_us": g,
                                "tool_us": tool.get(b, (None, ""))[0]} for b, _, p, g in rows]}))


if __name__ == "__main__":
    main()
