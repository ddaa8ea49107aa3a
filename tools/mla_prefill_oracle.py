#!/usr/bin/env python3
"""Ask vLLM itself which MLA prefill backend it picks, and compare with attn-select.

vLLM chooses the kernel for MLA *prefill* with a second selector
(``vllm.v1.attention.backends.mla.prefill``): ``get_mla_prefill_backend(vllm_config)``
-> ``Platform.get_mla_prefill_backend_cls(MLAPrefillSelectorConfig)``, and every
prefill backend's ``validate_configuration``.  The oracle harness (``oracle.py``)
does not cover it, so this tool reuses the oracle's bootstrap (vLLM's own
``NvmlCudaPlatform`` with an emulated compute capability, compiled extensions
stubbed) and calls those vLLM functions directly.

Sub-commands:

``grid``     write the verification grid (JSON Lines): capabilities 7.0-12.1 x dtypes x
             MLA dimension tuples x pinned backend (none, every registry name, bad
             names) x VLLM_BATCH_INVARIANT x absent packages.
``oracle``   (run with the oracle's interpreter, e.g. /work/oracle/.venv/bin/python)
             answer every config of a grid file with vLLM's code.
``compare``  (run in attn-select's environment) compare the answers with
             :func:`selector.solver.mla_prefill.select_mla_prefill`; exit 1 on any difference.
``golden``   pick a coverage-first subset of the answers for CI
             (tests/golden/oracle/vllm-0.33.0/mla_prefill.jsonl.gz).

    python tools/mla_prefill_oracle.py grid -o /tmp/prefill.grid.jsonl
    /work/oracle/.venv/bin/python tools/mla_prefill_oracle.py oracle /tmp/prefill.grid.jsonl \\
        -o /tmp/prefill.oracle.jsonl
    python tools/mla_prefill_oracle.py compare /tmp/prefill.oracle.jsonl
    python tools/mla_prefill_oracle.py golden /tmp/prefill.oracle.jsonl -n 800 \\
        -o tests/golden/oracle/vllm-0.33.0/mla_prefill.jsonl.gz

Answer line (one per config, compact JSON):

    {"input": {...},                                   # the config as given
     "backends": {"FLASH_ATTN": [], "FLASHINFER": ["compute capability 9.0 not supported"], ...},
     "asked": ["FLASH_ATTN"],                          # the backends vLLM's auto-selection
                                                       # evaluated, in order
     "selected": "FLASH_ATTN",                         # or null
     "error": null,                                    # vLLM's ValueError text, or
                                                       # "CONFIG: <text>" (AttentionConfig rejects
                                                       # the name), or "EXCEPTION <Type>: <text>"
     "vllm_version": "0.33.0"}

A backend whose lookup raises something other than ImportError is reported as
``["EXCEPTION <Type>: <message>"]``.  The oracle half uses only the standard
library, the oracle module and vLLM; the comparing half only attn-select.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import oracle

CAPABILITIES = oracle.cuda_capabilities(without=("8.7",))
"""The harness's capabilities but 8.7, as first recorded."""
DTYPES = ("bfloat16", "float16", "float32")
DIMENSIONS: tuple[dict[str, int], ...] = (
    {"qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128},  # DeepSeek-V2/V3/R1, Kimi-K2
    {"qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "v_head_dim": 256},  # GLM-5-style
    {"qk_nope_head_dim": 64, "qk_rope_head_dim": 64, "v_head_dim": 128},   # FA-only tuple
    {"qk_nope_head_dim": 256, "qk_rope_head_dim": 0, "v_head_dim": 256},   # GLM5Next NoPE
    {"qk_nope_head_dim": 64, "qk_rope_head_dim": 32, "v_head_dim": 64},    # MiniCPM3-style
    {"qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 256},  # near miss
    {"qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "v_head_dim": 128},  # near miss
    {"qk_rope_head_dim": 64, "v_head_dim": 128},                           # qk_nope_head_dim absent
    {},                                                                    # no MLA attributes
)
PINNED = (None, "FLASH_ATTN", "FLASHINFER", "TRTLLM_RAGGED", "TOKENSPEED_MLA", "ROCM_AITER_FA", "CPU",
          "CUSTOM", "flash_attn", "auto", "NOPE")
ABSENT = ((), ("flashinfer",), ("tokenspeed_mla",), ("flashinfer", "tokenspeed_mla"))
ENV_OF_PACKAGE = {"flashinfer": "env_flashinfer", "tokenspeed_mla": "env_tokenspeed_mla"}


def grid() -> Iterator[dict[str, Any]]:
    for cap, dtype, dims, pinned, bi, absent in itertools.product(
            CAPABILITIES, DTYPES, DIMENSIONS, PINNED, (False, True), ABSENT):
        cfg: dict[str, Any] = {"device_capability": cap, "dtype": dtype, "hf_text_config": dict(dims)}
        if pinned is not None:
            cfg["mla_prefill_backend"] = pinned
        if bi:
            cfg["batch_invariant"] = True
        if absent:
            cfg["absent_packages"] = list(absent)
        yield cfg


# --------------------------------------------------------------------------- the vLLM half


class _Vllm:
    """vLLM's MLA prefill selection behind the oracle's CUDA emulation."""

    def __init__(self, oracle_dir: str | None) -> None:
        oracle.start((9, 0), oracle_dir=oracle_dir)
        import torch
        import vllm
        from vllm.config import AttentionConfig, VllmConfig
        from vllm.platforms import current_platform
        from vllm.v1.attention.backends.mla.prefill import selector as prefill_selector
        from vllm.v1.attention.backends.mla.prefill.base import MLADimensions
        from vllm.v1.attention.backends.mla.prefill.registry import MLAPrefillBackendEnum

        self.torch = torch
        self.version = vllm.__version__
        self.AttentionConfig = AttentionConfig
        self.VllmConfig = VllmConfig
        self.platform = current_platform
        self.selector = prefill_selector
        self.MLADimensions = MLADimensions
        self.Enum = MLAPrefillBackendEnum
        self.members = list(MLAPrefillBackendEnum)
        self._asked: list[str] | None = None
        original = MLAPrefillBackendEnum.get_class

        def recording_get_class(member: Any) -> Any:  # instrumentation only
            if self._asked is not None:
                self._asked.append(member.name)
            return original(member)

        MLAPrefillBackendEnum.get_class = recording_get_class  # type: ignore[method-assign]

    def _selector_config(self, cfg: dict[str, Any]) -> Any:
        hf = cfg.get("hf_text_config") or {}
        dims = self.MLADimensions(qk_nope_head_dim=hf.get("qk_nope_head_dim", 0),
                                  qk_rope_head_dim=hf.get("qk_rope_head_dim", 0),
                                  v_head_dim=hf.get("v_head_dim", 0))
        return self.selector.MLAPrefillSelectorConfig(dtype=getattr(self.torch, cfg["dtype"]),
                                                      mla_dimensions=dims)

    def _stand_in(self, cfg: dict[str, Any]) -> Any:
        """What get_mla_prefill_backend reads of model_config: dtype and hf_text_config."""
        import types

        hf = types.SimpleNamespace(**(cfg.get("hf_text_config") or {}))
        return types.SimpleNamespace(dtype=getattr(self.torch, cfg["dtype"]), hf_text_config=hf)

    def answer(self, cfg: dict[str, Any]) -> dict[str, Any]:
        oracle.emulate(cfg["device_capability"])
        saved_env = os.environ.get("VLLM_BATCH_INVARIANT")
        saved_modules: dict[str, Any] = {}
        if cfg.get("batch_invariant"):
            os.environ["VLLM_BATCH_INVARIANT"] = "1"
        for package in cfg.get("absent_packages", ()):
            for name in [n for n in sys.modules if n == package or n.startswith(package + ".")] or [package]:
                saved_modules[name] = sys.modules.get(name)
                sys.modules[name] = None  # type: ignore[assignment]  # "not installed"
        try:
            return self._answer(cfg)
        finally:
            for name, module in saved_modules.items():
                if module is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = module
            if saved_env is None:
                os.environ.pop("VLLM_BATCH_INVARIANT", None)
            else:
                os.environ["VLLM_BATCH_INVARIANT"] = saved_env

    def _answer(self, cfg: dict[str, Any]) -> dict[str, Any]:
        capability = self.platform.get_device_capability()
        selector_config = self._selector_config(cfg)
        backends: dict[str, list[str]] = {}
        for member in self.members:
            try:
                backends[member.name] = list(member.get_class().validate_configuration(
                    capability, selector_config))
            except ImportError:
                backends[member.name] = ["ImportError"]
            except Exception as exc:  # vLLM does not catch these
                backends[member.name] = [f"EXCEPTION {type(exc).__name__}: {exc}"]
        out: dict[str, Any] = {"input": cfg, "backends": backends, "asked": [], "selected": None,
                               "error": None, "vllm_version": self.version}
        try:
            attention_config = self.AttentionConfig(mla_prefill_backend=cfg.get("mla_prefill_backend"))
        except Exception as exc:  # pydantic wraps vLLM's ValueError
            errors = getattr(exc, "errors", None)
            inner = errors()[0].get("ctx", {}).get("error") if callable(errors) else None
            out["error"] = f"CONFIG: {inner if inner is not None else exc}"
            return out
        vllm_config = self.VllmConfig(attention_config=attention_config)
        object.__setattr__(vllm_config, "model_config", self._stand_in(cfg))
        self.selector._auto_select_mla_prefill_backend.cache_clear()
        self._asked = []
        try:
            cls = self.selector.get_mla_prefill_backend(vllm_config)
            path = f"{cls.__module__}.{cls.__qualname__}"
            out["selected"] = next(m.name for m in self.members
                                   if m.value is not None and m.get_path() == path)
        except ValueError as exc:
            out["error"] = str(exc)
        except Exception as exc:
            out["error"] = f"EXCEPTION {type(exc).__name__}: {exc}"
        finally:
            asked, self._asked = self._asked, None
        out["asked"] = asked if cfg.get("mla_prefill_backend") is None else []
        return out


def run_oracle(args: argparse.Namespace) -> int:
    vllm = _Vllm(args.oracle_dir)
    configs = [json.loads(line) for line in Path(args.grid).read_text().splitlines() if line.strip()]
    order = sorted(range(len(configs)), key=lambda i: configs[i]["device_capability"])
    answers: list[dict[str, Any] | None] = [None] * len(configs)
    for i in order:
        answers[i] = vllm.answer(configs[i])
    with open(args.output, "w") as handle:
        for answer in answers:
            handle.write(json.dumps(answer, separators=(",", ":")) + "\n")
    print(f"{len(configs)} configs answered by vLLM {vllm.version}", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- the attn-select half


def ours(cfg: dict[str, Any]) -> dict[str, Any]:
    """attn-select's answer in the oracle's shape."""
    from selector.catalog import load_catalog
    from selector.errors import InputError
    from selector.inputs.flat import parse_capability
    from selector.solver.mla_prefill import load_mla_prefill, select_mla_prefill

    catalog = load_catalog()
    engine = catalog.engine(cfg.get("engine", "vllm==0.33.0"))
    hf = cfg.get("hf_text_config") or {}
    facts: dict[str, Any] = {
        "cc": parse_capability(cfg["device_capability"]), "dtype": cfg["dtype"], "use_mla": True,
        "qk_nope_head_dim": hf.get("qk_nope_head_dim"), "qk_rope_head_dim": hf.get("qk_rope_head_dim"),
        "v_head_dim": hf.get("v_head_dim"), "use_batch_invariant": bool(cfg.get("batch_invariant")),
    }
    for package in cfg.get("absent_packages", ()):
        facts[ENV_OF_PACKAGE[package]] = False
    data = load_mla_prefill(engine, catalog)
    assert data is not None
    out: dict[str, Any] = {"input": cfg, "backends": {}, "asked": [], "selected": None, "error": None}
    try:
        result = select_mla_prefill(facts, engine, cfg.get("mla_prefill_backend"), catalog=catalog)
    except InputError as exc:
        result = select_mla_prefill(facts, engine, None, catalog=catalog)
        out["error"] = f"CONFIG: {exc.message}"
    else:
        out["selected"] = result.selected
        if result.error is not None:
            out["error"] = result.error.message
        if result.mode == "auto":
            stop = result.priority.index(result.selected) + 1 if result.selected else None
            out["asked"] = list(result.priority[:stop])
    skip = {b.name for b in data.backends if not b.oracle}
    for verdict in sorted(result.verdicts, key=lambda v: [b.name for b in data.backends].index(v.backend)):
        if verdict.backend in skip:
            continue
        out["backends"][verdict.backend] = [
            ("EXCEPTION " if verdict.raises else "") + d.message for d in verdict.reasons]
    return out


def compare(answers: list[dict[str, Any]]) -> list[tuple[int, str, Any, Any]]:
    """(line, field, ours, vLLM's) for every difference."""
    from selector.catalog import load_catalog
    from selector.solver.mla_prefill import load_mla_prefill

    catalog = load_catalog()
    data = load_mla_prefill(catalog.engine("vllm==0.33.0"), catalog)
    assert data is not None
    skip = {b.name for b in data.backends if not b.oracle}
    diffs: list[tuple[int, str, Any, Any]] = []
    for number, answer in enumerate(answers, start=1):
        mine = ours(answer["input"])
        theirs = {k: v for k, v in answer["backends"].items() if k not in skip}
        if mine["backends"] != theirs:
            for name in sorted(set(theirs) | set(mine["backends"])):
                if mine["backends"].get(name) != theirs.get(name):
                    diffs.append((number, f"backends.{name}", mine["backends"].get(name), theirs.get(name)))
        for key in ("asked", "selected", "error"):
            if mine[key] != answer[key]:
                diffs.append((number, key, mine[key], answer[key]))
    return diffs


def run_compare(args: argparse.Namespace) -> int:
    answers = [json.loads(line) for line in Path(args.answers).read_text().splitlines() if line.strip()]
    diffs = compare(answers)
    bad = {d[0] for d in diffs}
    print(f"{len(answers) - len(bad)}/{len(answers)} configs agree with vLLM "
          f"(per-backend reasons, evaluation order, selection, error text)")
    for number, field, mine, theirs in diffs[: args.show]:
        print(f"  line {number} {field}:\n    ours:  {mine}\n    vLLM:  {theirs}")
    return 1 if diffs else 0


def _error_kind(error: str | None) -> str | None:
    """An error without its config-specific details (the golden's coverage features)."""
    if error is None:
        return None
    for prefix in ("No valid MLA prefill backend found", "CONFIG: Unknown MLA prefill backend"):
        if error.startswith(prefix):
            return prefix
    if error.startswith("Selected MLA prefill backend "):
        return " ".join(error.split()[:5])
    return error


def run_golden(args: argparse.Namespace) -> int:
    import make_golden

    make_golden.error_kind = _error_kind  # type: ignore[attr-defined]
    base_features = make_golden.features

    def features(record: dict[str, Any]) -> set[tuple[str, ...]]:
        cfg = record["input"]
        dims = json.dumps(cfg.get("hf_text_config"), sort_keys=True)
        if "mla_prefill_backend" in cfg:
            return base_features(record)
        auto = ("auto", cfg["device_capability"], dims, str(record["selected"]))
        return base_features(record) | {auto}

    make_golden.features = features
    select = make_golden.select
    records = [json.loads(line) for line in Path(args.answers).read_text().splitlines() if line.strip()]
    for record in records:
        record["priority"] = record.get("asked", [])
    chosen, core = select(records, args.n, args.seed)
    lines = []
    for index in sorted(chosen):
        record = dict(records[index])
        record.pop("priority")
        lines.append(json.dumps(record, separators=(",", ":")) + "\n")
    data = "".join(lines).encode()
    if args.output.endswith(".gz"):
        oracle.write_gz(args.output, data, name_in_header=False)
    else:
        oracle.write_bytes(args.output, data)
    print(f"{len(chosen)} lines ({core} cover every feature) -> {args.output}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("grid", help="write the verification grid")
    p.add_argument("-o", "--output", required=True)
    p = sub.add_parser("oracle", help="answer a grid with vLLM (oracle interpreter)")
    p.add_argument("grid")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--oracle-dir", help="the oracle folder (default: $ORACLE_DIR, else ../shared/oracle)")
    p = sub.add_parser("compare", help="compare vLLM's answers with attn-select")
    p.add_argument("answers")
    p.add_argument("--show", type=int, default=10)
    p = sub.add_parser("golden", help="coverage-first subset of the answers")
    p.add_argument("answers")
    p.add_argument("-n", type=int, default=800)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    if args.command == "grid":
        with open(args.output, "w") as handle:
            for cfg in grid():
                handle.write(json.dumps(cfg, separators=(",", ":")) + "\n")
        return 0
    return {"oracle": run_oracle, "compare": run_compare, "golden": run_golden}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
