"""vLLM's defaults have one source: the engine's ``defaults.yaml``.

A static check over ``selector/`` (the AST, so comments and docstrings do not count): no
parameter, field or ``x or <literal>`` fallback gives one of the settings vLLM defaults
(``max_num_seqs``, ``max_num_batched_tokens``, ``gpu_memory_utilization``, the CUDA-graph
mode and capture sizes) a Python literal, and the CUDA-graph mode names are one
``Literal`` type. Then, through the CLI: a hybrid model's report states one
``max_num_seqs`` and one ``max_num_batched_tokens`` in every section, and the KV fit
and the memory budget use the same figures (Gemma-2-9B on an L4).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from selector.catalog import load_catalog
from selector.inputs.config import parse_deployment
from selector.pipeline import solve_deployment
from tests.fuzz.test_config_fuzz import run_cli
from tests.recorded import RECORDED_ENGINE, pinned

ROOT = Path(__file__).resolve().parents[2]
SELECTOR = ROOT / "selector"

SETTINGS = {"max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization", "cudagraph_mode",
            "max_cudagraph_capture_size", "cudagraph_capture_sizes"}
"""The settings whose defaults vLLM decides (by release, device and usage context)."""

ALLOWED: dict[tuple[str, str], str] = {
    ("selector/smoke/plan.py", "cudagraph_mode"):
        "a smoke plan file's own field: the plan replays graphs only when it says so",
}
"""(file, setting) -> why a literal there is not one of vLLM's defaults."""


def _setting(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        name = node.id
    elif isinstance(node, ast.Attribute):
        name = node.attr
    elif isinstance(node, ast.arg):
        name = node.arg
    else:
        return None
    lowered = name.lower()
    if lowered in SETTINGS or lowered.endswith("cg_mode") or lowered.startswith("default_cudagraph"):
        return "cudagraph_mode" if "cg_mode" in lowered or "cudagraph_mode" in lowered else lowered
    return None


def _literal(node: ast.AST | None) -> bool:
    """A constant other than None (a number, a string, a bool)."""
    if isinstance(node, ast.Constant):
        return node.value is not None
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Field":
        default = next((k.value for k in node.keywords if k.arg == "default"), None)
        return _literal(default)
    return isinstance(node, (ast.List, ast.Tuple)) and bool(node.elts) and all(
        _literal(e) for e in node.elts)


MODES = {"NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"}


def _vllm_value(node: ast.AST) -> bool:
    """A number or a CUDA-graph mode name (a display placeholder such as '-' is not)."""
    if not isinstance(node, ast.Constant) or isinstance(node.value, bool):
        return False
    return isinstance(node.value, int | float) or node.value in MODES


def _findings(path: Path) -> list[str]:
    relative = str(path.relative_to(ROOT))
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []

    def flag(setting: str | None, node: ast.AST, how: str) -> None:
        if setting is not None and (relative, setting) not in ALLOWED:
            found.append(f"{relative}:{getattr(node, 'lineno', '?')}: {setting} {how}")

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True):
                if _literal(default):
                    flag(_setting(arg), default, "has a literal parameter default")
            for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
                if _literal(kw_default):
                    flag(_setting(arg), arg, "has a literal parameter default")
        elif isinstance(node, ast.AnnAssign) and _literal(node.value):
            flag(_setting(node.target), node, "has a literal field default")
        elif isinstance(node, ast.Assign) and _literal(node.value) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str) and node.value.value == "FULL_AND_PIECEWISE":
            for target in node.targets:
                flag(_setting(target) or "cudagraph_mode", node, "is assigned vLLM's default mode")
        elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            names = [_setting(value) for value in node.values]
            if any(names) and any(_vllm_value(value) for value in node.values):
                flag(next(n for n in names if n), node, "falls back to a literal (`x or <literal>`)")
    return found


def test_no_vllm_default_is_a_python_literal() -> None:
    found = [line for path in sorted(SELECTOR.rglob("*.py")) for line in _findings(path)]
    assert not found, "vLLM's defaults come from the engine's defaults.yaml " \
        "(Catalog.engine_defaults, selector.inputs.config.resolve_target):\n" + "\n".join(found)


def test_the_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The static check flags each shape it is meant to (a check that finds nothing
    proves nothing)."""
    sample = ROOT / "selector" / "_sample_for_the_defaults_check.py"
    sample.write_text(
        "from pydantic import Field\n"
        "def f(max_num_seqs: int = 256) -> None: ...\n"
        "class A:\n    gpu_memory_utilization: float = Field(default=0.9)\n"
        "    cudagraph_mode: str = 'FULL_AND_PIECEWISE'\n"
        "DEFAULT_CG_MODE = 'FULL_AND_PIECEWISE'\n"
        "def g(d: object) -> object:\n    return d.max_num_batched_tokens or 8192\n",
        encoding="utf-8")
    try:
        found = _findings(sample)
    finally:
        sample.unlink()
    assert len(found) == 5, found


def test_the_cudagraph_modes_are_one_literal_type() -> None:
    pattern = re.compile(r'Literal\[\s*"NONE",\s*"PIECEWISE"')
    defined = [str(p.relative_to(ROOT)) for p in sorted(SELECTOR.rglob("*.py"))
               if pattern.search(p.read_text(encoding="utf-8"))]
    assert defined == ["selector/schema/types.py"]


def test_a_hybrid_report_states_one_set_of_batch_limits(tmp_path: Path) -> None:
    """Jamba on two H100s with a small KV cache: the memory section's profile-run inputs
    and the Mamba block check (AS004: full CUDA graphs need one Mamba block per decode
    sequence) name the same max_num_seqs, vLLM's default there (1024), and one
    max_num_batched_tokens (8192)."""
    catalog = load_catalog()
    defaults = catalog.engine_defaults(RECORDED_ENGINE)
    h100 = catalog.device("H100")
    path = tmp_path / "deploy.yaml"
    path.write_text("device: H100\nmodel: jamba-v0.1\nparallel: {tensor_parallel_size: 2}\n"
                    "kv_cache_memory_bytes: 500000000\n", encoding="utf-8")
    code, out, err = run_cli(pinned(["check", str(path)]))
    assert code == 1, err
    text = re.sub(r"\s*[│┃]\s*", " ", out)
    seqs = {int(n) for n in re.findall(r"max_num_seqs \(?(\d+)", text)}
    tokens = {int(n) for n in re.findall(r"max_num_batched_tokens \(?(\d+)", text)}
    solved = solve_deployment(parse_deployment(str(path), path.read_text()), catalog,
                              engine=RECORDED_ENGINE)
    assert solved.model is not None and solved.model.memory is not None
    total = solved.model.memory.budget.inputs.total_memory_bytes
    assert (tokens, seqs) == tuple({n} for n in defaults.batch_defaults(
        (h100.name, *h100.aliases), total, h100.capability)) == ({8192}, {1024})
    assert "AS004" in out and "max_num_seqs (1024) exceeds available Mamba cache blocks" in text


def test_gemma2_on_l4_kv_fit_and_budget_agree(tmp_path: Path) -> None:
    """Gemma-2-9B on an L4: the KV fit's sliding-window need is computed with the batch
    limit the memory budget states (vLLM's `vllm serve` default there, 2048 batched
    tokens, with 0.92 of the memory), not another figure."""
    from selector.memory import kv_fit

    catalog = load_catalog()
    path = tmp_path / "deploy.yaml"
    path.write_text("device: L4\nmodel: gemma-2-9b\n", encoding="utf-8")
    solved = solve_deployment(parse_deployment(str(path), path.read_text()), catalog,
                              engine=RECORDED_ENGINE)
    assert solved.model is not None and solved.model.memory is not None
    memory, plan = solved.model.memory, solved.model.plan
    assert plan is not None and plan.capacity is not None and memory.fit is not None
    inputs = memory.budget.inputs
    assert (inputs.max_num_batched_tokens, inputs.max_num_seqs, inputs.gpu_memory_utilization) \
        == (2048, 256, 0.92)
    specs = [entry.spec for entry in plan.entries]

    def needed(in_flight: int) -> int:
        return kv_fit(specs, available_bytes=memory.fit.available_bytes,  # type: ignore[union-attr]
                      pool_block_bytes=plan.capacity.bytes_per_block,  # type: ignore[union-attr]
                      max_model_len=plan.capacity.max_model_len,  # type: ignore[union-attr]
                      in_flight_tokens=in_flight).needed_bytes

    assert memory.fit.needed_bytes == needed(inputs.max_num_batched_tokens) != needed(8192)
    code, out, err = run_cli(pinned(["check", str(path), "--format", "json"]))
    assert code in (0, 1), err
    assert json.loads(out)["memory"]["inputs"]["max_num_batched_tokens"] == 2048
