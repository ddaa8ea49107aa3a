#!/usr/bin/env python3
"""vLLM's own weight shapes, per GPU, for small synthetic MoE configs and for every real
config.json the project ships (tools/startup_fact_grid.py).

Run with an oracle interpreter (vLLM installed, CPU only), once per release::

    ORACLE_DIR=/work/oracle ORACLE_EXTRA_PATH=/path/to/extra \\
        /work/venvs/oracle-0.33.0/bin/python tools/weights_oracle.py \\
        --out tests/golden/oracle/vllm-0.33.0/weights.jsonl.gz

    ORACLE_DIR=/work/oracle ORACLE_EXTRA_PATH=/path/to/extra \\
        /work/venvs/oracle-0.33.0/bin/python tools/weights_oracle.py --real \\
        --out tests/golden/oracle/vllm-0.33.0/weights-configs.jsonl.gz

(``ORACLE_EXTRA_PATH``: a directory with torchvision, compressed-tensors and loguru, which
multimodal model modules import; see tools/vllm_model_reference.py.)

For every config it builds the ``VllmConfig`` as ``vllm serve --enforce-eager`` does
(``EngineArgs(...).create_engine_config()``; eager, because 0.25.1's compilation backend
imports FlashInfer's communication module, which needs libcudart; the weights are the
same), instantiates the model class vLLM's registry resolves (``get_model_architecture``)
under ``torch.device("meta")`` (no memory) and records every parameter of the module tree:
name, shape and dtype (``named_parameters()``).

``--real`` (``real_weight_configs()``: tests/fixtures/hf_configs, its edge shapes and the
presets in schemas/models): each config is built at tensor-parallel sizes 1 and 2 (and 4
and 8 for ``WIDE_TP``), the checkpoint's ``quantization_config`` removed (the bf16
architecture; how a quantization method turns parameters into bytes is recorded
elsewhere). TP > 1 is vLLM's own partition logic: the engine config is built with
``tensor_parallel_size=N`` and the one-process TP group answers world size N, rank 0, so
every ``ColumnParallelLinear`` / ``RowParallelLinear`` / ``QKVParallelLinear`` /
``VocabParallelEmbedding`` / ``FusedMoE`` sizes its rank-0 shard itself. Each parameter
is recorded compactly: its name with the layer index as ``*``, the owning module's
class (the split rule), the per-rank shape, dtype, and the layers it occurs in.

Parameters land on ``meta``: the harness's ``oracle.models.device_tensors_on_meta``
fills torch's ``_device_constructors`` cache before it wraps the factories (otherwise the
cache holds the wrappers, the real ``torch.empty`` is no "constructor" to the meta device
context, and every parameter is allocated in CPU memory); a module moved to the GPU in a
constructor stays on ``meta``. A build that allocated any real parameter is an error.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import oracle
from oracle.models import device_tensors_on_meta, gpu_model_runner, on_gpu, without_weight_downloads
from startup_fact_grid import new_answer, record_answers, weight_configs

REPO = oracle.REPO

WIDE_TP = frozenset({"meta-llama--Llama-3.1-8B", "Qwen--Qwen3-30B-A3B",
                     "deepseek-ai--DeepSeek-R1", "nvidia--Nemotron-H-56B-Base-8K",
                     "llama-3.1-70b", "qwen3-next-80b-a3b"})
"""Configs also built at TP 4 and 8: one dense, one MoE, one MLA, one hybrid (and two
presets)."""

_WEIGHT_STAND_INS = frozenset({"mimo", "minimax_m3", "minicpmv", "minicpmo"})

_LAYER = re.compile(r"(?<=\.)(\d+)(?=\.)")


def real_weight_configs() -> list[dict[str, Any]]:
    """``{"id", "source", "config"}`` rows: every real config.json the project ships,
    each checkpoint's quantization removed (vLLM builds the bf16 architecture)."""
    paths = sorted((REPO / "tests" / "fixtures" / "hf_configs").glob("*.json"))
    paths += sorted((REPO / "tests" / "fixtures" / "hf_configs" / "edge").glob("*.json"))
    paths += sorted((REPO / "schemas" / "models").glob("*.json"))
    rows = []
    for path in paths:
        if path.stem == "broken_layer_types":
            continue
        raw = json.loads(path.read_text(encoding="utf-8"))
        for key in ("quantization_config", "compression_config"):
            raw.pop(key, None)
        for section in ("text_config", "llm_config"):
            sub = raw.get(section)
            if isinstance(sub, dict):
                sub.pop("quantization_config", None)
        if raw.get("model_type") in ("nemotron-nas", "minicpm3", "qwen", *_WEIGHT_STAND_INS):
            raw.pop("auto_map", None)  # the harness's stand-in config class (remote code)
        without_weight_downloads(raw)  # offline: a Terratorch backbone's checkpoint
        rows.append({"id": path.stem, "source": str(path.relative_to(REPO)), "config": raw})
    return rows


@contextmanager
def _tensor_parallel(size: int) -> Iterator[None]:
    """The one-process TP group answers world size ``size``, rank 0, while a model is built."""
    from vllm.distributed import parallel_state

    group = parallel_state.get_tp_group()
    saved = (group.world_size, group.rank_in_group)
    group.world_size, group.rank_in_group = size, 0
    try:
        yield
    finally:
        group.world_size, group.rank_in_group = saved


@contextmanager
def _module_moves_on_meta() -> Iterator[None]:
    """``module.to(device=<the GPU>)`` in a constructor (Kimi-K2.5's vision tower) keeps
    the module on ``meta``."""
    import torch

    saved = torch.nn.Module.to

    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        device = kwargs.get("device", args[0] if args else None)
        if device is not None and on_gpu(device):
            kwargs.pop("device", None)
            args = tuple(a for a in args if a is not device)
            return saved(self, *args, **kwargs) if (args or kwargs) else self
        return saved(self, *args, **kwargs)

    torch.nn.Module.to = to  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.nn.Module.to = saved  # type: ignore[method-assign]


def _owners(model: Any) -> dict[str, str]:
    """Each parameter's owning module class (the split rule vLLM applies to it)."""
    owners: dict[str, str] = {}
    for module_name, module in model.named_modules():
        for param_name, _param in module.named_parameters(recurse=False):
            full = f"{module_name}.{param_name}" if module_name else param_name
            owners[full] = type(module).__name__
    return owners


def _ranges(indices: list[int]) -> str:
    out: list[str] = []
    for index in sorted(set(indices)):
        if out and "-" not in out[-1].split(",")[-1] and int(out[-1]) == index - 1:
            out[-1] = f"{out[-1]}-{index}"
        elif out and "-" in out[-1] and int(out[-1].split("-")[1]) == index - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{index}"
        else:
            out.append(str(index))
    return ",".join(out)


def _compact(model: Any) -> tuple[list[list[Any]], int, int]:
    """(rows ``[name with * for the layer, owner class, shape, dtype, layers]``, the
    parameters and bytes of this rank). Raises if any parameter is not on ``meta``."""
    owners = _owners(model)
    grouped: dict[tuple[str, str, tuple[int, ...], str], list[int]] = {}
    params = nbytes = 0
    for name, param in model.named_parameters():  # a tied or aliased tensor once, as held
        if param.device.type != "meta":
            raise RuntimeError(f"parameter {name} was allocated on {param.device}, not meta")
        match = _LAYER.search(name)
        pattern = _LAYER.sub("*", name, count=1) if match else name
        key = (pattern, owners.get(name, "?"), tuple(param.shape),
               str(param.dtype).removeprefix("torch."))
        grouped.setdefault(key, []).append(int(match.group(1)) if match else -1)
        params += param.numel()
        nbytes += param.numel() * param.element_size()
    rows = [[pattern, owner, list(shape), dtype,
             _ranges([i for i in layers if i >= 0]) if layers[0] >= 0 else ""]
            for (pattern, owner, shape, dtype), layers in sorted(grouped.items())]
    return rows, params, nbytes


def _build(target: Path, tp: int) -> dict[str, Any]:
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader.utils import get_model_architecture
    from vllm.utils.torch_utils import set_default_torch_dtype
    from vllm_model_reference import _max_len

    out: dict[str, Any] = {}
    stage = "EngineArgs.create_engine_config"
    try:
        vllm_config = EngineArgs(model=str(target), skip_tokenizer_init=True,
                                 dtype="bfloat16", max_model_len=min(2048, _max_len(target)),
                                 enforce_eager=True, tensor_parallel_size=tp,
                                 distributed_executor_backend="mp" if tp > 1 else None,
                                 ).create_engine_config()
        model_config = vllm_config.model_config
        stage = "model class"
        model_cls, arch = get_model_architecture(model_config)
        out["architecture"] = arch
        out["model_class"] = f"{model_cls.__module__}.{model_cls.__qualname__}"
        stage = "model construction"
        with (
            set_current_vllm_config(vllm_config),
            set_default_torch_dtype(model_config.dtype),
            _tensor_parallel(tp),
            torch.device("meta"),
            device_tensors_on_meta(),
            _module_moves_on_meta(),
        ):
            model = model_cls(vllm_config=vllm_config, prefix="")
        stage = "parameters"
        out["parameters"], out["params"], out["bytes"] = _compact(model)
        out["status"] = "ok"
    except Exception as exc:  # vLLM's refusal is an answer too
        out["status"] = "error"
        out["stage"] = stage
        out["error"] = f"{type(exc).__name__}: {exc}"[:1000]
        out["traceback_tail"] = traceback.format_exc().splitlines()[-8:]
    return out


def answer(row: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """vLLM's parameters for one synthetic config, every one by name (or the error)."""
    import torch
    import vllm
    from vllm.config import set_current_vllm_config
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader.utils import get_model_architecture
    from vllm.utils.torch_utils import set_default_torch_dtype

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
            device_tensors_on_meta(),
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


def real_answer(row: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """vLLM's per-rank parameters for one real config at each tensor-parallel size."""
    import vllm

    target, out = new_answer(row, workdir, vllm.__version__)
    out["source"] = row["source"]
    sizes = (1, 2, 4, 8) if row["id"] in WIDE_TP else (1, 2)
    out["tp"] = {}
    for tp in sizes:
        built = _build(target, tp)
        out["tp"][str(tp)] = built
    first = out["tp"]["1"]
    out["status"] = first["status"]
    if first["status"] != "ok":
        out["error"] = first["error"]
    return out


def _summary(result: dict[str, Any]) -> str:
    if "tp" in result:
        return " ".join(f"tp{tp}={r.get('bytes', r.get('error', '?'))}"
                        for tp, r in result["tp"].items())
    return f"{len(result['parameters'])} parameters"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True, help="a .jsonl.gz file")
    parser.add_argument("--real", action="store_true",
                        help="the real configs at TP 1, 2 (4, 8): weights-configs.jsonl.gz")
    parser.add_argument("--only", nargs="*", default=None,
                        help="ids to record again; the other answers in --out are kept (--real)")
    parser.add_argument("--configs", nargs="*", type=Path, default=None,
                        help="config.json files answered as --real answers are (TP 1 and 2), "
                             "the synthetic configs the real grid leaves out")
    args = parser.parse_args(argv)
    # transformers has no config class for these (remote code): the stand-in keeps every
    # key; the layers are still vLLM's (sliding_window, which MiMo's remote class
    # rewrites, changes no weight)
    oracle.start_models(_WEIGHT_STAND_INS)
    # the model runner as on a GPU: an architecture that builds on Model Runner V2 only
    # (LongcatFlashNgramForCausalLM) gets its parameters, not the CPU's V1 refusal; the
    # runner changes no parameter shape
    gpu_model_runner()
    if args.configs:
        record_answers(args.out, [
            {"id": path.stem, "source": str(path.resolve().relative_to(REPO)),
             "config": json.loads(path.read_text(encoding="utf-8"))} for path in args.configs],
            real_answer, _summary)
        return 0
    if args.real:
        rows = real_weight_configs()
        if args.only is None or not args.out.is_file():
            record_answers(args.out, rows, real_answer, _summary)
            return 0
        kept = {a["id"]: a for a in oracle.read_jsonl(args.out) if a["id"] not in args.only}
        fresh = {a["id"]: a for a in record_answers(
            args.out, [r for r in rows if r["id"] in args.only], real_answer, _summary)}
        merged = (fresh.get(row["id"]) or kept.get(row["id"]) for row in rows)
        oracle.write_jsonl_gz(args.out, [result for result in merged if result is not None])
    else:
        record_answers(args.out, weight_configs(), answer, _summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
