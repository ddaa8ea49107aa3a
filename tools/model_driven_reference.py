#!/usr/bin/env python3
"""vLLM's own answers for the models whose layers choose their attention backend
themselves (DeepSeek-V4 / V4.1, MiniMax-M3: the model-driven members of the
release's ``AttentionBackendEnum``), on each emulated GPU and under each explicit
``--attention-backend``.

Run with an oracle interpreter (vLLM installed, CPU only)::

    ORACLE_EXTRA_PATH=/work/oracle-extra ORACLE_DIR=/work/oracle \\
    /work/.venvs/oracle-0.33.0/bin/python tools/model_driven_reference.py \\
        --out tests/golden/vllm_models/model_driven/vllm-0.33.0.jsonl.gz \\
        tests/fixtures/hf_configs/deepseek-ai--DeepSeek-V4-Flash.json

For every config and every compute capability of ``--capability`` (default 9.0 and
10.0: H200 and B200; each in a process of its own, so that a class attribute vLLM
computes at import reads that GPU) it makes vLLM's platform that GPU (``oracle.set_capability``)
and takes ``tools/vllm_model_reference.py``'s answer (the model class built on the
meta device, every layer's KV-cache spec and the backend its module names, the groups
before and after ``update_block_size_for_backend``) with no ``--attention-backend``,
then with each name of ``--backends`` (default: every model-driven name of the
release's enum, the generic sparse-MLA names the V4 layer maps and one
priority-list backend) that the release's enum has: vLLM's build (the backend each
layer's module then names) or its refusal, word for word. A name the release's enum
lacks is recorded as vLLM's argument parser refusing it (``AttentionBackendEnum[name]``
raising ``KeyError``).

``--cuda-runtime 13.0`` gives the build the CUDA runtime of the release's wheel
(``torch.version.cuda``, which the CPU torch lacks: vLLM then reads runtime 0), as the
GatedDeltaNet prefill kernel on SM10x asks for it (its prefill checkpoints set the block
alignment); each answer records it.

A harness failure writes nothing (exit 1), as in ``vllm_model_reference.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import itertools
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import vllm_model_reference as ref

DEFAULT_CAPABILITIES = ((9, 0), (10, 0))
"""H200 (SM90) and B200 (SM100)."""

MODEL_DRIVEN_SUFFIXES = ("_DSV4", "_DSV41", "_MSA", "MINIMAX_M3_SPARSE")
"""The enum members the V4 / V4.1 / MiniMax-M3 layers select (registry.py: "model-driven")."""

EXTRA_BACKENDS = ("FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM120",
                  "FLASHMLA")
"""Generic names the V4 layer maps or refuses (nvidia/model.py ``_select_dsv4_attn_cls``)
and one priority-list MLA backend (what an unrelated name does)."""


def _enum_names() -> list[str]:
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    return [m.name for m in AttentionBackendEnum]


def default_backends() -> list[str]:
    names = _enum_names()
    driven = [n for n in names if n.endswith(MODEL_DRIVEN_SUFFIXES)]
    return driven + [n for n in EXTRA_BACKENDS if n in names]


_SEEN: dict[str, Any] = {}
"""Every backend class a built layer named (its ``get_attn_backend()``), by name."""

_SEEN_CONFIG: dict[str, Any] = {}
"""The ``VllmConfig`` of the model whose layer first named each backend: a class whose
kernel block sizes read the current config (GLM-5.3's ``Glm5NextIndexerBackend``:
``index_kpool`` times DeepGEMM's page sizes, mla/indexer.py) states them under it."""


def _capture_backends() -> None:
    """Note each built layer's backend class as the reference reads the specs, and record
    each layer's CUDA-graph support as its metadata builder states it for that spec
    (``get_cudagraph_support(vllm_config, spec)``, what the runner takes the minimum of)."""
    original = ref._layer_specs

    def capture(vllm_config: Any, layers: dict[str, Any]) -> Any:
        for module in layers.values():
            with contextlib.suppress(Exception):
                backend = module.get_attn_backend()
                _SEEN.setdefault(backend.get_name(), backend)
                _SEEN_CONFIG.setdefault(backend.get_name(), vllm_config)
        specs, records = original(vllm_config, layers)
        for record in records:  # the builder's answer for this layer's spec
            if record["name"] in specs:
                builder = layers[record["name"]].get_attn_backend().get_builder_cls()
                support = builder.get_cudagraph_support(vllm_config, specs[record["name"]])
                record["cudagraph_support"] = support.name
        return specs, records

    ref._layer_specs = capture


def class_facts(cls: Any, vllm_config: Any = None) -> dict[str, Any]:
    """What a backend class states of itself: kernel block sizes (under ``vllm_config``
    when given: the config of the model that built it), the metadata builder's
    CUDA-graph support, dtypes and KV-cache dtypes."""
    from vllm.config import set_current_vllm_config

    record: dict[str, Any] = {"name": cls.get_name(), "class": f"{cls.__module__}.{cls.__qualname__}"}
    with set_current_vllm_config(vllm_config) if vllm_config is not None else contextlib.nullcontext():
        sizes = cls.get_supported_kernel_block_sizes()
    record["kernel_block_sizes"] = [s if isinstance(s, int) else {"multiple_of": s.base}
                                    for s in sizes]
    with contextlib.suppress(Exception):
        builder = cls.get_builder_cls()
        support = getattr(builder, "_cudagraph_support", None)
        record["builder"] = builder.__qualname__
        record["cudagraph_support"] = getattr(support, "name", None)
    record["dtypes"] = [ref._dtype_name(d) for d in getattr(cls, "supported_dtypes", [])]
    record["kv_cache_dtypes"] = list(getattr(cls, "supported_kv_cache_dtypes", []))
    return record


def backend_facts(names: list[str]) -> list[dict[str, Any]]:
    """What each named backend class states of itself (its class attributes and static
    methods; no GPU is touched): the kernel block sizes, the metadata builder's CUDA-graph
    support, the dtypes and KV-cache dtypes it lists. A class that cannot be imported on
    this host (a ROCm-only module) is recorded with the import error."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    out: list[dict[str, Any]] = []
    for name in names:
        member = AttentionBackendEnum[name]
        record: dict[str, Any] = {"backend": name, "class_path": member.value}
        try:
            cls = member.get_class()
        except Exception as exc:  # the class's module cannot load here
            record["import_error"] = f"{type(exc).__name__}: {exc}"[:300]
            out.append(record)
            continue
        record.update(class_facts(cls))
        out.append(record)
    return out


def _hf_configs(configs: list[Path]) -> Iterator[tuple[Path, Any]]:
    """Each config (once, sorted) as vLLM's ``get_config`` reads it from a folder of its
    own."""
    from vllm.transformers_utils.config import get_config

    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(set(configs)):
            folder = Path(tmp) / path.stem
            folder.mkdir()
            (folder / "config.json").write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
            yield path, get_config(str(folder), trust_remote_code=False)


def _per_gpu(configs: list[Path], capabilities: list[tuple[int, int]]
             ) -> Iterator[tuple[Any, dict[str, Any]]]:
    """(hf_config, the answer's row so far) for each config on each emulated capability,
    the oracle set to that capability while the caller asks."""
    import oracle  # type: ignore[import-not-found]
    import vllm

    for path, hf_config in _hf_configs(configs):
        for capability in capabilities:
            oracle.set_capability(capability)
            yield hf_config, {"config": ref._relative(path),
                              "capability": ".".join(map(str, capability)),
                              "vllm_version": vllm.__version__, "status": "ok"}


MEGA_TP_SIZES = (1, 2, 4, 8, 16)
"""The tensor-parallel sizes ``--mega-topologies`` asks DeepSeek-V4.1's mega layer about."""


def mega_topologies(configs: list[Path], capabilities: list[tuple[int, int]]
                    ) -> list[dict[str, Any]]:
    """vLLM's ``DeepseekV4MegaAttnAttention.is_available_for`` (the SM10x default's
    topology rule: heads and ``wo_a`` groups per rank) for each config, capability and
    ``MEGA_TP_SIZES`` entry. The method reads only ``model_config.hf_config`` and
    ``parallel_config.tensor_parallel_size``, which a namespace gives it (no TP group is
    built on this one-process host)."""
    import importlib.util
    import types

    if importlib.util.find_spec("vllm.models.deepseek_v41.nvidia.flash_mla_mega_attn") is None:
        return []
    from vllm.models.deepseek_v41.nvidia.flash_mla_mega_attn import DeepseekV4MegaAttnAttention

    out: list[dict[str, Any]] = []
    for hf_config, row in _per_gpu(configs, capabilities):
        answers = {}
        for tp in MEGA_TP_SIZES:
            config = types.SimpleNamespace(
                model_config=types.SimpleNamespace(hf_config=hf_config),
                parallel_config=types.SimpleNamespace(tensor_parallel_size=tp))
            answers[str(tp)] = bool(DeepseekV4MegaAttnAttention.is_available_for(config))
        out.append({**row, "mega_available_by_tp": answers})
    return out


SELECTION_TP_SIZES = (1, 8, 16)
SELECTION_PCP_SIZES = (1, 2)
"""The tensor- and prefill-context-parallel sizes ``--selection-matrix`` asks about."""


def selection_matrix(configs: list[Path], capabilities: list[tuple[int, int]],
                     names: list[str], mega_ops: bool) -> list[dict[str, Any]]:
    """vLLM's own ``_select_dsv4_attn_cls`` of DeepSeek-V4.1's CUDA model
    (``vllm/models/deepseek_v41/nvidia/model.py``) for each config, capability,
    ``--attention-backend`` (none, then ``names``), TP and PCP size: the backend its
    class names (``backend_cls.get_name()``) or its error, word for word. The function
    reads only ``attention_config.backend``, ``parallel_config``'s two sizes and (for
    the mega layer's ``is_available_for``) ``model_config.hf_config``, which a namespace
    gives it (no TP / PCP group is built on this one-process host)."""
    import importlib.util
    import types

    if importlib.util.find_spec("vllm.models.deepseek_v41.nvidia.model") is None:
        return []
    from vllm.models.deepseek_v41.nvidia import model as v41
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    out: list[dict[str, Any]] = []
    for hf_config, row in _per_gpu(configs, capabilities):
        answers: dict[str, Any] = {}
        for name, tp, pcp in itertools.product([None, *names], SELECTION_TP_SIZES,
                                               SELECTION_PCP_SIZES):
            config = types.SimpleNamespace(
                model_config=types.SimpleNamespace(hf_config=hf_config),
                attention_config=types.SimpleNamespace(
                    backend=None if name is None else AttentionBackendEnum[name]),
                parallel_config=types.SimpleNamespace(
                    tensor_parallel_size=tp, prefill_context_parallel_size=pcp))
            try:
                answer = v41._select_dsv4_attn_cls(config).backend_cls.get_name()
            except (ValueError, NotImplementedError) as exc:
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            answers[f"{name or 'none'}|tp{tp}|pcp{pcp}"] = answer
        out.append({**row, "mega_attn_ops": mega_ops, "selection_matrix": answers})
    return out


def _unknown(config: Path, capability: tuple[int, int], name: str,
             kv_cache_dtype: str | None) -> dict[str, Any]:
    import vllm

    return {"config": ref._relative(config), "vllm_version": vllm.__version__,
            "capability": ".".join(map(str, capability)), "attention_backend": name,
            **({} if kv_cache_dtype is None else {"kv_cache_dtype": kv_cache_dtype}),
            "status": "refused", "stage": "argument parser",
            "error": f"KeyError: {name!r} is not a member of this release's AttentionBackendEnum"}


def _per_capability(argv: list[str], capabilities: list[tuple[int, int]], out: Path) -> int:
    """One process per emulated GPU: a class attribute vLLM computes when its module is
    imported (``FlashAttentionMetadataBuilder._cudagraph_support``, by the FlashAttention
    version of the GPU, flash_attn.py:619-623) would otherwise keep the first GPU's value.
    Each GPU's answers are merged into ``out`` (``--merge``)."""
    import subprocess

    rest: list[str] = []
    skip = False
    for word in argv:  # the arguments without --capability and --merge
        if skip:
            skip = False
            continue
        if word == "--capability":
            skip = True
            continue
        if word.startswith("--capability=") or word == "--merge":
            continue
        rest.append(word)
    merge = "--merge" in argv
    for i, capability in enumerate(capabilities):
        extra = ["--merge"] if merge or i else []
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), *rest, *extra,
                               "--capability", ".".join(map(str, capability))], check=False)
        if done.returncode:
            print(f"capability {capability}: exit {done.returncode} ({out} may hold the "
                  "GPUs before it)", file=sys.stderr)
            return done.returncode
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("configs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="a .jsonl.gz file")
    parser.add_argument("--capability", action="append", default=None,
                        help="e.g. 9.0 (repeatable; default 9.0 and 10.0)")
    parser.add_argument("--backends", nargs="*", default=None,
                        help="explicit --attention-backend names (default: see the docstring)")
    parser.add_argument("--kv-cache-dtype", action="append", default=None,
                        help="--kv-cache-dtype values (repeatable; default: vLLM's default "
                             "and fp8, which the releases before 0.26.0 require for V4)")
    parser.add_argument("--block-size", type=int, action="append", default=None,
                        help="--block-size values (repeatable; default: none given)")
    parser.add_argument("--no-default", action="store_true",
                        help="skip the run without --attention-backend")
    parser.add_argument("--merge", action="store_true",
                        help="keep the answers already in --out for (config, capability, "
                             "backend) not run now")
    parser.add_argument("--mega-ops", action="store_true",
                        help="build as on a GPU whose FlashMLA has the mega-attention ops "
                             "(oracle.models.flashmla_mega_build: DeepSeek-V4.1's SM10x "
                             "default and FLASHMLA_MEGA_ATTN_DSV41 become buildable)")
    parser.add_argument("--engram-tokenizer", action="store_true",
                        help="a tokenizer stand-in for DeepSeek-V4.1's Engram layers "
                             "(oracle.models.engram_tokenizer)")
    parser.add_argument("--selection-matrix", action="store_true",
                        help="also record DeepSeek-V4.1's _select_dsv4_attn_cls per backend "
                             "name, TP and PCP size (with --mega-ops: its mega default)")
    parser.add_argument("--mega-topologies", action="store_true",
                        help="also record DeepseekV4MegaAttnAttention.is_available_for per "
                             "tensor-parallel size (with --mega-ops: the heads-fit rule)")
    parser.add_argument("--gpu-runner", action="store_true",
                        help="choose the model runner as on the emulated GPU (Model Runner V2: "
                             "tools/vllm_model_reference.py --gpu-runner); Step5 builds on it only")
    parser.add_argument("--cuda-runtime", default=None,
                        help="torch.version.cuda as the release's wheel has it (e.g. 13.0: "
                             "vLLM 0.33.0's requires cu13), which the CPU torch lacks "
                             "(platforms/cuda.py get_cuda_runtime_major: 0); recorded per answer")
    args = parser.parse_args(argv)
    capabilities: list[tuple[int, int]] = (
        [(int(c.split(".")[0]), int(c.split(".")[1])) for c in args.capability]
        if args.capability else list(DEFAULT_CAPABILITIES))
    if len(capabilities) > 1:
        return _per_capability(list(sys.argv[1:] if argv is None else argv), capabilities, args.out)
    ref._bootstrap()
    if args.gpu_runner:
        ref.gpu_model_runner()
    if args.mega_ops:
        from oracle.models import flashmla_mega_build  # type: ignore[import-not-found]

        flashmla_mega_build()
    if args.engram_tokenizer:
        from oracle.models import engram_tokenizer  # type: ignore[import-not-found]

        engram_tokenizer()
    _capture_backends()
    if args.cuda_runtime:
        # the GDN prefill kernel on SM10x / SM12x needs CUDA >= 13 (qwen_gdn_linear_attn.py
        # _resolve_gdn_prefill_backend), read from torch.version.cuda when a layer is built
        import torch

        torch.version.cuda = args.cuda_runtime
    import oracle  # type: ignore[import-not-found]  # the shared oracle (ORACLE_DIR)

    known = set(_enum_names())
    backends = args.backends if args.backends is not None else default_backends()
    runs: list[str | None] = ([] if args.no_default else [None]) + list(backends)
    dtypes: list[str | None] = ([None if d == "auto" else d for d in args.kv_cache_dtype]
                                if args.kv_cache_dtype else [None, "fp8"])
    blocks: list[int | None] = list(args.block_size) if args.block_size else [None]
    results: list[dict[str, Any]] = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for capability in capabilities:
            oracle.set_capability(capability)
            for path, name, dtype, block in itertools.product(sorted(set(args.configs)), runs,
                                                              dtypes, blocks):
                if name is not None and name not in known:
                    if block is None:
                        results.append(_unknown(path, capability, name, dtype))
                    continue
                try:
                    result = ref.reference(path, Path(tmp), attention_backend=name,
                                           kv_cache_dtype=dtype, block_size=block)
                except ref.HarnessError as exc:
                    failures.append(str(exc))
                    print(f"HARNESS FAILURE {exc}", file=sys.stderr)
                    continue
                if args.cuda_runtime:
                    result["cuda_runtime"] = args.cuda_runtime
                if args.mega_ops:  # the answer of a GPU build with the mega-attention ops
                    result["mega_attn_ops"] = True
                results.append(result)
                summary = result.get("error") or f"{len(result['layers'])} layers"
                print(f"{result['status']:7} {capability} {name} {dtype} {path.name}: "
                      f"{summary}"[:300],
                      file=sys.stderr)
    if failures:
        print(f"{len(failures)} harness failure(s): nothing written", file=sys.stderr)
        return 1
    import vllm

    results.append({"config": "<backend classes>", "capability": "", "vllm_version": vllm.__version__,
                    "status": "ok", "backends": backend_facts(
                        sorted(n for n in known if n.endswith(MODEL_DRIVEN_SUFFIXES))),
                    "layer_backends": [class_facts(_SEEN[n], _SEEN_CONFIG.get(n)) for n in sorted(_SEEN)]})

    if args.mega_topologies:
        results.extend(mega_topologies(args.configs, capabilities))
    if args.selection_matrix:
        results.extend(selection_matrix(args.configs, capabilities,
                                        [n for n in backends if n in known], args.mega_ops))

    def key(r: dict[str, Any]) -> tuple[str, str, str, str, int]:
        return (str(r["config"]), str(r["capability"]), str(r.get("attention_backend") or ""),
                str(r.get("kv_cache_dtype") or ""), int(r.get("requested_block_size") or 0))

    if args.merge and args.out.is_file():
        fresh = {key(r) for r in results}
        with gzip.open(args.out, "rt", encoding="utf-8") as handle:
            kept = [json.loads(line) for line in handle if line.strip()]
        results = [r for r in kept if key(r) not in fresh] + results
    results.sort(key=key)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        raw = stack.enter_context(args.out.open("wb"))
        gz = stack.enter_context(gzip.GzipFile(fileobj=raw, mode="wb", mtime=0))
        for result in results:
            result.pop("traceback_tail", None) if result["status"] == "ok" else None
            gz.write((json.dumps(result, separators=(",", ":"), sort_keys=True) + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
