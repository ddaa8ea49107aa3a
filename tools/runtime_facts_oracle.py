#!/usr/bin/env python3
"""Ask vLLM itself for every backend's run-time facts, per compute capability.

The selection oracle (``oracle.py``) answers which backend vLLM picks; this tool asks
the selected backend's own classes what the profile data states about it after the
selection, without a GPU (the oracle's bootstrap: vLLM's ``NvmlCudaPlatform`` with an
emulated compute capability, compiled extensions stubbed):

* ``kernel_block_sizes``: ``Backend.get_supported_kernel_block_sizes()`` (no KV spec,
  i.e. without a model);
* ``preferred_block_size``: ``Backend.get_preferred_block_size(16)`` (16 is
  ``CacheConfig.DEFAULT_BLOCK_SIZE``);
* ``cudagraph_support``: ``Builder.get_cudagraph_support(VllmConfig(), None)`` (class
  attributes are evaluated when the module is imported: hence one fresh process per
  capability); ``{"dynamic": true, ...}`` when the builder's override needs a model or
  a KV spec to answer;
* ``reorder_batch_threshold``: the builder's class attribute, or, when its ``__init__``
  calls ``_init_reorder_batch_threshold``, the arguments of that call read from vLLM's
  source (``{"init": {"value": ..., "supports_spec_as_decode": ...}}``): the threshold
  without speculative decoding or DCP is ``value``;
* ``mla_chunked_prefill_workspace`` (once, not per backend): the tokens of the MLA
  chunked-prefill workspace, ``MLACommonMetadataBuilder.determine_chunked_prefill_workspace_size``,
  over a grid of ``max_model_len`` x ``max_num_seqs`` x ``block_size``
  (``"L,S,B": tokens``); the profile run's MLA stand-in is sized from it.

Sub-commands::

    # one capability, in the oracle's interpreter (vLLM installed):
    /work/venvs/oracle-0.33.0/bin/python tools/runtime_facts_oracle.py ask --capability 9.0
    # every capability, one fresh process each, merged into one small JSON file:
    python tools/runtime_facts_oracle.py all --python /work/venvs/oracle-0.33.0/bin/python \\
        -o tests/golden/oracle/vllm-0.33.0/runtime_facts.json

``tests/golden/test_runtime_facts.py`` compares the profile data with the committed
answers.  The asking half uses only the standard library, the oracle module and vLLM.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import sys
import textwrap
from typing import Any

import oracle

CAPABILITIES = oracle.cuda_capabilities(without=("7.0", "8.7"))
"""Every capability of the harness's list but 7.0 and 8.7, as first recorded."""
DEFAULT_BLOCK_SIZE = 16


def _jsonable_block_size(size: Any) -> Any:
    if isinstance(size, int):
        return size
    base = getattr(size, "base", None)
    return {"multiple_of": base} if isinstance(base, int) else repr(size)


def _error(exc: BaseException) -> str:
    return f"EXCEPTION {type(exc).__name__}: {exc}"


def _init_threshold_call(builder: Any, base_builder: Any) -> dict[str, Any] | None:
    """The arguments the builder's own ``__init__`` passes to
    ``_init_reorder_batch_threshold`` (read from vLLM's source with ``ast``), or None."""
    for klass in builder.__mro__:
        if klass is base_builder or "__init__" not in vars(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass.__init__)))
        except (OSError, TypeError, SyntaxError):
            return {"dynamic": True}
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, ast.AnnAssign) else [])
            if any(isinstance(t, ast.Attribute) and t.attr == "reorder_batch_threshold"
                   for t in targets):
                return {"class": klass.__name__, "value": {"dynamic": "assigned in __init__"},
                        "supports_spec_as_decode": None}
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "_init_reorder_batch_threshold"):
                names = ("reorder_batch_threshold", "supports_spec_as_decode",
                         "supports_dcp_with_varlen")
                args = dict(zip(names, node.args, strict=False))
                args.update({k.arg: k.value for k in node.keywords if k.arg})
                value = args.get("reorder_batch_threshold")
                spec = args.get("supports_spec_as_decode")
                return {
                    "class": klass.__name__,
                    "value": value.value if isinstance(value, ast.Constant) else
                    ({"dynamic": ast.unparse(value)} if value is not None else 1),
                    "supports_spec_as_decode": spec.value if isinstance(spec, ast.Constant)
                    else (ast.unparse(spec) if spec is not None else False),
                }
        # no call here: the class's __init__ may still run a parent's through super()
    return None


def _builder_facts(backend: Any, base_builder: Any, vllm_config: Any) -> dict[str, Any]:
    try:
        builder = backend.get_builder_cls()
    except Exception as exc:  # recorded, never raised
        return {"cudagraph_support": _error(exc), "reorder_batch_threshold": _error(exc)}
    overridden = (inspect.getattr_static(builder, "get_cudagraph_support")
                  is not inspect.getattr_static(base_builder, "get_cudagraph_support"))
    support: Any = getattr(builder, "_cudagraph_support", None)
    if overridden:
        # asked without a model or KV spec: an answer that needs them is "dynamic"
        try:
            support = builder.get_cudagraph_support(vllm_config, None)
        except Exception as exc:
            support = {"dynamic": True, "without_model": _error(exc)}
    init_call = _init_threshold_call(builder, base_builder)
    threshold: Any = getattr(builder, "reorder_batch_threshold", None)
    if init_call is not None:
        threshold = {"init": init_call, "class_value": threshold}
    return {
        "builder": builder.__name__,
        "cudagraph_support": getattr(support, "name", support),
        "cudagraph_support_overridden": overridden,
        "reorder_batch_threshold": threshold,
    }


WORKSPACE_GRID = {"max_model_len": (1024, 2048, 4096, 8192, 16384, 131072),
                  "max_num_seqs": (1, 64, 128, 256, 1024, 2048),
                  "block_size": (16, 64, 128)}


def _mla_workspace_grid() -> dict[str, Any]:
    """``determine_chunked_prefill_workspace_size`` over ``WORKSPACE_GRID`` (it reads only
    ``max_model_len``, ``max_num_seqs`` and ``block_size`` of the config)."""
    from types import SimpleNamespace

    builder: Any = None
    for module in ("vllm.model_executor.layers.attention.mla_attention",
                   "vllm.v1.attention.backends.mla.common"):
        try:
            builder = importlib.import_module(module).MLACommonMetadataBuilder
            break
        except (ImportError, AttributeError):
            continue
    if builder is None:
        return {"import_error": "no MLACommonMetadataBuilder"}
    grid: dict[str, Any] = {}
    for length in WORKSPACE_GRID["max_model_len"]:
        for seqs in WORKSPACE_GRID["max_num_seqs"]:
            for block in WORKSPACE_GRID["block_size"]:
                config = SimpleNamespace(
                    model_config=SimpleNamespace(max_model_len=length),
                    scheduler_config=SimpleNamespace(max_num_seqs=seqs),
                    cache_config=SimpleNamespace(block_size=block))
                try:
                    grid[f"{length},{seqs},{block}"] = \
                        builder.determine_chunked_prefill_workspace_size(config)
                except Exception as exc:
                    grid[f"{length},{seqs},{block}"] = _error(exc)
    return grid


def ask(capability: str, oracle_dir: str | None = None) -> dict[str, Any]:
    """vLLM's answers for every CUDA backend at one capability (call in a fresh process)."""
    vllm_oracle = oracle.engine(capability, oracle_dir=oracle_dir)
    from vllm.v1.attention.backend import AttentionMetadataBuilder

    vllm_config = vllm_oracle._vllm_config("auto", None, False)
    answers: dict[str, Any] = {}
    for name in vllm_oracle.backend_names:
        try:
            backend = vllm_oracle.E[name].get_class()
        except Exception as exc:
            answers[name] = {"import_error": _error(exc)}
            continue
        entry: dict[str, Any] = {}
        try:
            entry["kernel_block_sizes"] = [
                _jsonable_block_size(s) for s in backend.get_supported_kernel_block_sizes()]
        except Exception as exc:
            entry["kernel_block_sizes"] = _error(exc)
        try:
            entry["preferred_block_size"] = backend.get_preferred_block_size(DEFAULT_BLOCK_SIZE)
        except Exception as exc:
            entry["preferred_block_size"] = _error(exc)
        entry.update(_builder_facts(backend, AttentionMetadataBuilder, vllm_config))
        answers[name] = entry
    return {"vllm_version": vllm_oracle.vllm_version, "capability": capability, "backends": answers,
            "mla_chunked_prefill_workspace": _mla_workspace_grid()}


def ask_all(python: str, oracle_dir: str | None, capabilities: tuple[str, ...]) -> dict[str, Any]:
    merged: dict[str, Any] = {"vllm_version": None, "default_block_size": DEFAULT_BLOCK_SIZE,
                              "capabilities": {}}
    where = str(oracle.oracle_dir(oracle_dir))
    for capability in capabilities:
        try:
            answer = oracle.run_fresh(__file__, "ask", {"capability": capability, "oracle_dir": where},
                                      python=python)
        except oracle.FreshProcessError as exc:
            raise SystemExit(f"capability {capability}: {exc}") from exc
        merged["vllm_version"] = answer["vllm_version"]
        merged["capabilities"][capability] = answer["backends"]
        merged["mla_chunked_prefill_workspace"] = answer["mla_chunked_prefill_workspace"]
        print(f"{capability}: {len(answer['backends'])} backends", file=sys.stderr)
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("ask", help="one capability (run with the oracle's interpreter)")
    one.add_argument("--capability", required=True)
    one.add_argument("--oracle-dir", help="the oracle folder (default: $ORACLE_DIR, ../shared/oracle)")
    every = sub.add_parser("all", help="every capability, one fresh process each")
    every.add_argument("--python", required=True, help="the oracle venv's interpreter")
    every.add_argument("--oracle-dir", help="the oracle folder (default: $ORACLE_DIR, ../shared/oracle)")
    every.add_argument("--capabilities", default=",".join(CAPABILITIES))
    every.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    if args.command == "ask":
        sys.stdout.write(json.dumps(ask(args.capability, args.oracle_dir)) + "\n")
        return 0
    merged = ask_all(args.python, args.oracle_dir, tuple(args.capabilities.split(",")))
    oracle.write_json(args.output, merged)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
