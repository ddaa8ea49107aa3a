#!/usr/bin/env python3
"""Static backend columns of a profile, read from the vLLM release itself.

``tools/release_probe.py`` (run in the release's environment, with the
oracle's CUDA mocks) asks every CUDA backend class what it states by itself:
dtypes, KV-cache dtypes, head sizes, kernel block sizes, compute capability
support (per capability), MLA / sparse, attention types and the feature flags.
This tool compares those answers with the columns of the engine profile
``vllm==RELEASE`` (the profile's conditions are evaluated per capability for a
plain decoder request, the scope in which vLLM's class methods answer):

    python tools/extract_static.py 0.29.0 --oracle ../shared/oracle --venv VENV          # check
    python tools/extract_static.py 0.29.0 --oracle ... --write                           # write
    python tools/extract_static.py 0.29.0 --probe probe.json                             # offline

``--write`` puts every differing *literal* column (a list, ``null`` or a
constant true/false) into ``schemas/engines/vllm-RELEASE/backends/NAME.yaml``
as an ``inherit: true`` patch over the parent profile's backend, citing the
class's module.  A column the profile states as a condition (e.g. FlashInfer's
sinks) is never rewritten: its difference is printed for a person to decide,
and the conformance harness (``tools/conformance.py``) shows whether the rule
as a whole agrees.  Exit status: 0 no difference, 1 differences, 2 unusable.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import oracle
import yaml
from release_probe import CAPABILITIES

from selector import expr as E
from selector.catalog import EngineData, load_catalog
from selector.inputs.flat import facts_from_flat
from selector.schema.backend import BackendSpec
from selector.schema.types import MultipleOf
from selector.solver import derive_facts
from selector.solver.compiled import compiled_for

# feature flags compared (profile Features field -> probe key)
FEATURES = ("sink", "mm_prefix", "per_head_quant_scales", "sliding_window", "rswa", "non_causal",
            "non_causal_dcp", "batch_invariance", "kv_connector", "pcp", "dcp", "alibi_sqrt",
            "device_cpu_query_lens_mismatch")


def _scope(engine: EngineData, spec: BackendSpec, cap: str,
           kv_cache_dtype: str = "auto") -> dict[str, Any]:
    """Request facts of a plain decoder request on ``cap`` (model absent), derived."""
    config = {"device_capability": cap, "head_size": 128, "dtype": "bfloat16",
              "kv_cache_dtype": kv_cache_dtype, "block_size": None}
    facts, _ = facts_from_flat(config, engine.profile)
    compiled = compiled_for(engine.engine, catalog=load_catalog())
    full = {**compiled.defaults, **facts.stated}
    _, _, derived = compiled.evaluate(full)
    scope = {**full, **derived}
    derive_facts(spec.facts, scope)
    return scope


def _truth(condition: object, scope: dict[str, Any]) -> Any:
    if isinstance(condition, bool):
        return condition
    try:
        return bool(E.evaluate(E.parse(str(condition)), scope))
    except Exception as exc:  # a condition over facts the plain request lacks
        return f"cannot evaluate: {exc}"


def _sizes(spec: BackendSpec, scope: dict[str, Any]) -> list[object]:
    for variant in spec.kernel_block_sizes:
        if _truth(variant.when, scope) is True:
            return [{"multiple_of": s.multiple_of} if isinstance(s, MultipleOf) else s
                    for s in variant.sizes]
    return []


def _probe_value(entry: dict[str, Any], key: str, cap: str) -> Any:
    varying = entry.get("by_capability", {}).get(key)
    return varying[cap] if varying is not None else entry.get(key)


def _accepted_kv_dtypes(engine: EngineData, spec: BackendSpec, cap: str,
                        kv_dtypes: list[str]) -> list[str] | None:
    """The KV-cache dtypes the profile accepts on ``cap`` (``None``: all of vLLM's)."""
    accepted = []
    for dtype in kv_dtypes:
        if spec.kv_cache_dtypes and dtype not in spec.kv_cache_dtypes:
            continue
        if spec.kv_cache_dtype_condition is not True and _truth(
                spec.kv_cache_dtype_condition, _scope(engine, spec, cap, dtype)) is not True:
            continue
        accepted.append(dtype)
    return None if accepted == kv_dtypes else accepted


def compare_backend(engine: EngineData, spec: BackendSpec, entry: dict[str, Any],
                    kv_dtypes: list[str]) -> list[dict[str, Any]]:
    """Differences for one backend: {column, profile, vllm, literal, caps}."""
    diffs: list[dict[str, Any]] = []
    scopes = {cap: _scope(engine, spec, cap) for cap in CAPABILITIES}

    def note(column: str, ours: Any, theirs: Any, literal: bool, caps: list[str] | None = None) -> None:
        diffs.append({"column": column, "profile": ours, "vllm": theirs, "literal": literal,
                      **({"capabilities": caps} if caps else {})})

    if list(spec.dtypes) != entry.get("dtypes"):
        note("dtypes", list(spec.dtypes), entry.get("dtypes"), True)
    wrong = []
    for cap in CAPABILITIES:
        ours_kv = _accepted_kv_dtypes(engine, spec, cap, kv_dtypes)
        if ours_kv != _probe_value(entry, "kv_cache_dtypes", cap):
            wrong.append((cap, ours_kv))
    if wrong:
        varies = "kv_cache_dtypes" in entry.get("by_capability", {})
        note("kv_cache_dtypes", wrong[0][1], _probe_value(entry, "kv_cache_dtypes", wrong[0][0]),
             spec.kv_cache_dtype_condition is True and not varies, [c for c, _ in wrong])
    theirs_hs = entry.get("head_sizes")
    if isinstance(theirs_hs, list):
        ours_hs = list(spec.head_sizes) if spec.head_sizes else []
        if ours_hs != theirs_hs:
            note("head_sizes", ours_hs or None, theirs_hs or None, spec.head_size_condition is True)
    if list(spec.attn_types) != entry.get("attn_types"):
        note("attn_types", list(spec.attn_types), entry.get("attn_types"), True)
    if (spec.family == "mla") != (entry.get("is_mla") is True):
        note("family", spec.family, "mla" if entry.get("is_mla") else "standard", True)
    ours_caps = [cap for cap in CAPABILITIES if _truth(spec.compute_capability, scopes[cap]) is True]
    if ours_caps != entry.get("compute_capability"):
        note("compute_capability", ours_caps, entry.get("compute_capability"), False)
    wrong = [cap for cap in CAPABILITIES
             if _sizes(spec, scopes[cap]) != _probe_value(entry, "kernel_block_sizes", cap)]
    if wrong:
        note("kernel_block_sizes", _sizes(spec, scopes[wrong[0]]),
             _probe_value(entry, "kernel_block_sizes", wrong[0]), len(spec.kernel_block_sizes) == 1,
             wrong)
    features = spec.features.model_dump()
    for name in ("sparse", *FEATURES):
        key = "is_sparse" if name == "sparse" else name
        if key not in entry and key not in entry.get("by_capability", {}):
            continue
        wrong = [cap for cap in CAPABILITIES
                 if _truth(features[name], scopes[cap]) != _probe_value(entry, key, cap)]
        if wrong:
            note(f"features.{name}", features[name], _probe_value(entry, key, wrong[0]),
                 isinstance(features[name], bool) and key not in entry.get("by_capability", {}),
                 wrong)
    return diffs


def check(engine: EngineData, probed: dict[str, Any]) -> dict[str, Any]:
    """Per backend the differences, plus backends only one side has."""
    evaluated = set(probed["backends_evaluated"])
    reachable = evaluated | set(probed["explicit_only"])
    ours = set(engine.backends)
    report: dict[str, Any] = {
        "engine": engine.engine, "vllm_version": probed["vllm_version"],
        "missing_in_profile": sorted(evaluated - ours),
        "not_in_vllm": sorted(n for n in ours - reachable
                              if engine.backends[n].selection == "auto"),
        "backends": {},
    }
    for name in sorted(ours & set(probed["backends"])):
        diffs = compare_backend(engine, engine.backends[name], probed["backends"][name],
                                probed["kv_cache_dtypes"])
        if diffs:
            report["backends"][name] = diffs
    return report


def write_patches(report: dict[str, Any], probed: dict[str, Any], engine_dir: Path) -> list[Path]:
    """Literal differences -> ``backends/NAME.yaml`` (``inherit: true`` patches)."""
    written: list[Path] = []
    for name, diffs in report["backends"].items():
        literal = [d for d in diffs if d["literal"]]
        if not literal:
            continue
        path = engine_dir / "backends" / f"{name}.yaml"
        doc: dict[str, Any] = yaml.safe_load(path.read_text()) if path.exists() else {"inherit": True}
        for d in literal:
            column, value = d["column"], d["vllm"]
            if column.startswith("features."):
                doc.setdefault("features", {})[column.split(".", 1)[1]] = value
            elif column == "kernel_block_sizes":
                doc["kernel_block_sizes"] = [{"sizes": value}]
            else:
                doc[column] = value
        module = probed["backends"][name]["module"].replace(".", "/") + ".py"
        head = (f"# vLLM {probed['vllm_version']}: columns read from {module} by "
                "tools/extract_static.py\n")
        path.parent.mkdir(parents=True, exist_ok=True)
        body = yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=100)
        old = path.read_text() if path.exists() else ""
        comments = "".join(line + "\n" for line in old.splitlines() if line.startswith("#"))
        path.write_text((comments or head) + body)
        written.append(path)
    return written


def render(report: dict[str, Any]) -> list[str]:
    out = [f"static columns of {report['engine']} vs vLLM {report['vllm_version']}"]
    if report["missing_in_profile"]:
        out.append(f"  backends vLLM has and the profile lacks: {report['missing_in_profile']}")
    if report["not_in_vllm"]:
        out.append(f"  auto-selectable backends of the profile vLLM lacks: {report['not_in_vllm']}")
    for name, diffs in report["backends"].items():
        for d in diffs:
            kind = "literal" if d["literal"] else "rule   "
            caps = f" on {','.join(d['capabilities'])}" if d.get("capabilities") else ""
            out.append(f"  {kind} {name}.{d['column']}{caps}: profile {json.dumps(d['profile'])}"
                       f" vllm {json.dumps(d['vllm'])}")
    if len(out) == 1:
        out.append("  no differences")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("release", help="vLLM release, e.g. 0.29.0")
    ap.add_argument("--probe", type=Path, help="a release_probe.py JSON (no environment needed)")
    ap.add_argument("--oracle", type=Path,
                    help="the vLLM oracle directory (default: $ORACLE_DIR, else ../shared/oracle)")
    ap.add_argument("--venv", type=Path, help="the release's environment")
    ap.add_argument("--venv-root", type=Path, default=Path.home() / ".cache" / "attn-select-oracle")
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "attn-select-conformance")
    ap.add_argument("--profile", help="engine profile to check (default: vllm==RELEASE)")
    ap.add_argument("--write", action="store_true", help="write the literal differences")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    a = ap.parse_args(argv)
    if a.probe:
        probed = json.loads(a.probe.read_text())
    else:
        import conformance

        try:
            oracle_dir = oracle.oracle_dir(a.oracle)
            venv = conformance.find_venv(a.release, oracle_dir, a.venv, a.venv_root, False)
            probed = conformance.probe(venv / "bin" / "python", oracle_dir,
                                       a.work / f"vllm-{a.release}" / "probe.json")
        except (conformance.HarnessError, oracle.OracleNotFoundError) as exc:
            print(f"extract_static: {exc}", file=sys.stderr)
            return 2
    engine = load_catalog().engine(a.profile or f"vllm=={a.release}")
    report = check(engine, probed)
    if a.json:
        print(json.dumps(report, indent=1))
    else:
        print("\n".join(render(report)))
    if a.write:
        for path in write_patches(report, probed, engine.directory):
            print(f"wrote {path}")
    return 1 if report["backends"] or report["missing_in_profile"] else 0


if __name__ == "__main__":
    sys.exit(main())
