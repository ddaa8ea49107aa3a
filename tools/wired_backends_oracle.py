#!/usr/bin/env python3
"""Ask vLLM itself for the facts of the backends it wires without selection.

A Mamba-1, Mamba-2, Gated DeltaNet or short-convolution mixer gets its state backend from
``MambaAttentionBackendEnum`` by the layer's mamba type, a linear (lightning) attention
mixer the backend its own class returns (Bailing-MoE-V2.5's ``BailingMoELinearAttention``),
and DeepSeek-V3.2's sparse indexer gets ``DeepseekV32IndexerBackend``; the attention
selector never sees them.
The backend files with ``wired_for`` state their facts; this tool asks the classes (the
oracle's bootstrap: vLLM's ``NvmlCudaPlatform`` at an emulated compute capability,
compiled extensions stubbed; no GPU) for the same questions as
``tools/runtime_facts_oracle.py``, plus the names, the legacy KV-cache layout aliases
vLLM accepts, the per-layer (FlashInfer) name of each 5-D layout, the ``KVCacheLayout``
members and the layout preference when no backend declares one::

    # one engine, in the oracle's interpreter (vLLM installed):
    /work/venvs/oracle-0.33.0/bin/python tools/wired_backends_oracle.py ask
    # every oracle venv, one fresh process each, into the golden folders:
    python tools/wired_backends_oracle.py all --venvs /work/venvs

``tests/golden/test_wired_backends.py`` compares the data with the committed answers
(``tests/golden/oracle/vllm-<version>/wired_backends.json``).
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import oracle
from runtime_facts_oracle import DEFAULT_BLOCK_SIZE, _builder_facts, _error, _jsonable_block_size

CAPABILITY = "9.0"
"""The wired backends' class facts do not depend on the device except where a builder
asks (the indexer's CUDA-graph support on SM100): asked on Hopper."""
MAMBA_MEMBERS = {"mamba1": "MAMBA1", "mamba2": "MAMBA2", "gdn": "GDN_ATTN", "short_conv": "SHORT_CONV"}
"""``wired_for`` -> the ``MambaAttentionBackendEnum`` member the layer's mamba type picks."""
INDEXER = "vllm.v1.attention.backends.mla.indexer.DeepseekV32IndexerBackend"
MIXER_BACKENDS = {
    "linear": ("model_executor/layers/mamba/linear/bailing_linear_attn.py", "BailingMoELinearAttention"),
}
"""``wired_for`` -> (the vLLM file, the mixer class) whose own ``get_attn_backend`` gives the
layer its backend (``LinearAttention``'s mamba type is LINEAR, but the one linear-attention
mixer of the profiled registries, Bailing's, returns its own subclass:
bailing_linear_attn.py:494-499)."""


def _mixer_backend(path: str, class_name: str) -> str:
    """The backend class ``class_name.get_attn_backend`` imports and returns, as a qualified
    name, read from vLLM's source (the mixer's module needs the model stand-ins to import)."""
    import vllm

    tree = ast.parse((Path(vllm.__file__).parent / path).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "get_attn_backend":
                    imported = {alias.asname or alias.name: f"{stmt.module}.{alias.name}"
                                for stmt in ast.walk(item) if isinstance(stmt, ast.ImportFrom)
                                for alias in stmt.names}
                    returned = [stmt.value.id for stmt in ast.walk(item)
                                if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Name)]
                    if len(returned) == 1 and returned[0] in imported:
                        return imported[returned[0]]
    raise LookupError(f"{path}: {class_name}.get_attn_backend returns no imported class")


def _assigned_threshold(builder: Any) -> dict[str, Any] | None:
    """``self.reorder_batch_threshold = <constant>`` in the builder's own ``__init__``
    (read from vLLM's source), or None when it assigns none or no constant."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(builder.__init__)))
    except (OSError, TypeError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and any(
                isinstance(t, ast.Attribute) and t.attr == "reorder_batch_threshold"
                for t in node.targets):
            return {"assigned_in_init": node.value.value}
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and isinstance(
                node.target, ast.Attribute) and node.target.attr == "reorder_batch_threshold":
            # the class attribute plus something (speculative tokens) in __init__
            return {"class_value": getattr(builder, "reorder_batch_threshold", None),
                    "added_in_init": ast.unparse(node.value)}
    return None


def _backend_facts(backend: Any, base_builder: Any, vllm_config: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": backend.get_name(), "class_name": backend.__name__}
    try:
        entry["kernel_block_sizes"] = [
            _jsonable_block_size(s) for s in backend.get_supported_kernel_block_sizes()]
    except Exception as exc:  # recorded, never raised
        entry["kernel_block_sizes"] = _error(exc)
    entry.update(_builder_facts(backend, base_builder, vllm_config))
    assigned = _assigned_threshold(backend.get_builder_cls())
    if assigned is not None:
        entry["reorder_batch_threshold"] = assigned
    return entry


def ask(oracle_dir: str | None = None) -> dict[str, Any]:
    """vLLM's answers for every wired backend (call in a fresh process)."""
    vllm_oracle = oracle.engine(CAPABILITY, oracle_dir=oracle_dir)
    from vllm.utils.import_utils import resolve_obj_by_qualname
    from vllm.v1.attention.backend import AttentionMetadataBuilder
    from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum

    vllm_config = vllm_oracle._vllm_config("auto", None, False)
    answers: dict[str, Any] = {}
    for wired_for, member in MAMBA_MEMBERS.items():
        backend = MambaAttentionBackendEnum[member].get_class()
        answers[wired_for] = _backend_facts(backend, AttentionMetadataBuilder, vllm_config)
    for wired_for, (path, class_name) in MIXER_BACKENDS.items():
        backend = resolve_obj_by_qualname(_mixer_backend(path, class_name))
        answers[wired_for] = _backend_facts(backend, AttentionMetadataBuilder, vllm_config)
    answers["sparse_indexer"] = _backend_facts(resolve_obj_by_qualname(INDEXER),
                                               AttentionMetadataBuilder, vllm_config)
    import vllm.config.cache as cache_config
    import vllm.v1.attention.backends.utils as backend_utils

    aliases = getattr(cache_config, "_LAYOUT_COMPAT_ALIASES", None)
    per_layer = getattr(backend_utils, "_FLASHINFER_LAYOUT_NAMES", None)
    preference = getattr(backend_utils, "_DEFAULT_LAYOUT_PREFERENCE", None)
    try:
        from vllm.v1.kv_cache_layout import KVCacheLayout
        members: list[str] | None = [member.name for member in KVCacheLayout]
    except ImportError:  # before the 5-D layouts
        members = None
    return {"vllm_version": vllm_oracle.vllm_version, "capability": CAPABILITY,
            "default_block_size": DEFAULT_BLOCK_SIZE, "wired_for": answers,
            "layout_aliases": dict(aliases) if aliases is not None else None,
            "per_layer_layouts": dict(per_layer) if per_layer is not None else None,
            "layout_members": members,
            "default_layout_preference": [layout.name for layout in preference]
            if preference is not None else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("ask", help="one engine (run with the oracle's interpreter)")
    one.add_argument("--oracle-dir", help="the oracle folder (default: $ORACLE_DIR, ../shared/oracle)")
    one.add_argument("-o", "--out", help="write the answer here (default: print it)")
    every = sub.add_parser("all", help="every oracle venv, one fresh process each")
    every.add_argument("--venvs", default="/work/venvs", help="holds oracle-<version>/")
    every.add_argument("--oracle-dir", help="the oracle folder (default: $ORACLE_DIR, ../shared/oracle)")
    args = parser.parse_args(argv)
    if args.command == "ask":
        answer = ask(args.oracle_dir)
        if args.out:
            oracle.write_json(args.out, answer)
        else:
            sys.stdout.write(json.dumps(answer) + "\n")
        return 0
    where = str(oracle.oracle_dir(args.oracle_dir))
    for venv in sorted(Path(args.venvs).glob("oracle-*")):
        try:
            answer = oracle.run_fresh(__file__, "ask", {"oracle_dir": where},
                                      python=venv / "bin" / "python")
        except oracle.FreshProcessError as exc:
            raise SystemExit(f"{venv.name}: {exc}") from exc
        target = oracle.golden(answer["vllm_version"], "wired_backends.json")
        oracle.write_json(target, answer)
        print(f"{venv.name}: {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
