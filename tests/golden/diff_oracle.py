"""The oracle backing of the ``diff`` goldens: each deployment in tests/fixtures/diff/
as the oracle's flat selector config, and the real vLLM answers for both versions.

Regenerate the stored answers (needs the oracle and its venvs, see
tests/golden/oracle/README.md)::

    python3 -m tests.golden.diff_oracle            # writes tests/fixtures/diff/oracle.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from selector.catalog import load_catalog
from selector.inputs.config import load_deployment, resolve_device

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "diff"
ORACLE_ANSWERS = FIXTURES / "oracle.json"
VERSIONS = {"vllm==0.25.1": ".venv-0.25.1", "vllm==0.33.0": ".venv"}
REPO = Path(__file__).resolve().parents[2]


def deployment_files() -> list[Path]:
    return sorted(FIXTURES.glob("*.yaml"))


def deployment_to_flat(path: Path) -> dict[str, Any]:
    """The deployment as the oracle's input (tensor parallelism applied: the oracle's
    model stand-in runs with one rank)."""
    loaded = load_deployment(str(path))
    d = loaded.deployment
    _, cc, _ = resolve_device(d, load_catalog())
    layer = d.layer
    tp = d.parallel.tensor_parallel_size
    q_heads = layer.num_heads // tp
    kv_heads = max(1, (layer.num_kv_heads or layer.num_heads) // tp)
    mla = layer.mla
    config: dict[str, Any] = {
        "device_capability": f"{cc // 10}.{cc % 10}",
        "head_size": mla.kv_lora_rank + mla.qk_rope_head_dim if mla else layer.head_size,
        "dtype": d.dtype, "kv_cache_dtype": d.kv_cache_dtype, "block_size": d.block_size,
        "use_mla": mla is not None, "has_sink": layer.has_sink,
        "use_sparse": bool(mla and mla.index_topk is not None),
        "use_mm_prefix": layer.mm_prefix,
        "use_per_head_quant_scales": layer.per_head_quant_scales,
        "has_sliding_window": layer.sliding_window is not None,
        "use_non_causal": d.attention_config.use_non_causal, "attn_type": layer.attn_type,
        "model": {"num_attention_heads": q_heads, "num_kv_heads": 1 if mla else kv_heads},
    }
    if mla is not None:
        config["num_heads"] = q_heads
        hf = {"kv_lora_rank": mla.kv_lora_rank, "qk_rope_head_dim": mla.qk_rope_head_dim,
              "qk_nope_head_dim": mla.qk_nope_head_dim, "v_head_dim": mla.v_head_dim}
        if mla.index_topk is not None:
            hf["index_topk"] = mla.index_topk
        config["model"]["hf_text_config"] = hf
    if d.attention_backend:
        config["attention_backend"] = d.attention_backend.upper()
    return config


def main() -> int:
    oracle_dir = Path(os.environ.get("ORACLE_DIR", "/work/oracle"))
    files = deployment_files()
    configs = [deployment_to_flat(p) for p in files]
    answers: dict[str, dict[str, Any]] = {p.stem: {"input": c} for p, c in zip(files, configs, strict=True)}
    with tempfile.TemporaryDirectory() as tmp:
        inputs = Path(tmp) / "inputs.json"
        inputs.write_text(json.dumps(configs))
        for engine, venv in VERSIONS.items():
            raw, sweep = Path(tmp) / "oracle.json", Path(tmp) / "sweep.jsonl"
            subprocess.run([str(oracle_dir / venv / "bin" / "python"), "oracle.py", str(inputs),
                            "-o", str(raw), "--compact"], cwd=oracle_dir, check=True)
            subprocess.run([sys.executable, str(REPO / "tools" / "oracle_to_sweep.py"), str(raw),
                            "-o", str(sweep)], check=True)
            for path, line in zip(files, sweep.read_text().splitlines(), strict=True):
                answer = json.loads(line)
                answers[path.stem][engine] = {k: answer.get(k) for k in
                                              ("backends", "selected", "error", "priority",
                                               "vllm_version")}
    ORACLE_ANSWERS.write_text(json.dumps(answers, indent=1, sort_keys=True) + "\n")
    print(f"wrote {ORACLE_ANSWERS} ({len(files)} deployments x {len(VERSIONS)} versions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
