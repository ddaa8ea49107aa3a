#!/usr/bin/env python3
"""Record vLLM's own answers for the golden MLA deployments (tests/fixtures/mla/*.yaml).

For each deployment this writes ``<name>.oracle.json`` next to it:

* ``attention``: the oracle harness (``oracle.py``, real vLLM 0.33.0) on the equivalent
  flat selector config, with the model stand-in carrying the MLA dimensions
  (``num_heads`` and ``num_attention_heads`` = query heads per tensor-parallel rank);
* ``prefill``: vLLM's MLA prefill-backend selection for the same model, answered by
  ``tools/mla_prefill_oracle.py`` (``get_mla_prefill_backend`` and every prefill
  backend's ``validate_configuration``).

The oracle cannot express decode context parallelism, so deployments with
``decode_context_parallel_size > 1`` get no oracle file; their expectations are
hand-written from the reference in ``<name>.reference.json``.

    python tools/mla_deployments_oracle.py            # all of tests/fixtures/mla
    ORACLE_DIR=/work/oracle python tools/mla_deployments_oracle.py tests/fixtures/mla/dsv3-h100-tp8.yaml

Needs the oracle's venv (``<oracle>/.venv``; the harness locates the oracle: ``$ORACLE_DIR``,
else ../shared/oracle).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import oracle
from oracle import REPO as ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "mla"

from selector.catalog import load_catalog  # noqa: E402
from selector.inputs.config import load_deployment, resolve_device  # noqa: E402


def flat_config(path: Path) -> dict[str, Any] | None:
    """The oracle's input for one MLA deployment (None when it uses DCP/PCP)."""
    d = load_deployment(str(path)).deployment
    mla = d.layer.mla
    if mla is None:
        raise ValueError(f"{path}: not an MLA deployment")
    if d.parallel.decode_context_parallel_size > 1 or d.parallel.prefill_context_parallel_size > 1:
        return None
    _, cc, _ = resolve_device(d, load_catalog())
    per_rank = d.layer.num_heads // d.parallel.tensor_parallel_size
    hf: dict[str, Any] = {"kv_lora_rank": mla.kv_lora_rank, "qk_rope_head_dim": mla.qk_rope_head_dim,
                          "qk_nope_head_dim": mla.qk_nope_head_dim, "v_head_dim": mla.v_head_dim}
    if mla.index_topk is not None:
        hf["index_topk"] = mla.index_topk
    config: dict[str, Any] = {
        "device_capability": f"{cc // 10}.{cc % 10}",
        "head_size": mla.kv_lora_rank + mla.qk_rope_head_dim,
        "dtype": d.dtype,
        "kv_cache_dtype": d.kv_cache_dtype,
        "block_size": d.block_size,
        "use_mla": True,
        "use_sparse": mla.index_topk is not None,
        "num_heads": per_rank,
        "model": {"num_kv_heads": 1, "num_attention_heads": per_rank, "hf_text_config": hf},
    }
    if d.attention_backend:
        config["attention_backend"] = d.attention_backend.upper()
    return config


def prefill_config(path: Path) -> dict[str, Any]:
    """The input of tools/mla_prefill_oracle.py for one deployment."""
    d = load_deployment(str(path)).deployment
    mla = d.layer.mla
    assert mla is not None
    _, cc, _ = resolve_device(d, load_catalog())
    config: dict[str, Any] = {
        "device_capability": f"{cc // 10}.{cc % 10}", "dtype": d.dtype,
        "hf_text_config": {"qk_nope_head_dim": mla.qk_nope_head_dim,
                           "qk_rope_head_dim": mla.qk_rope_head_dim, "v_head_dim": mla.v_head_dim},
    }
    if d.attention_config.mla_prefill_backend is not None:
        config["mla_prefill_backend"] = d.attention_config.mla_prefill_backend
    return config


def _strip(error: str | None) -> str | None:
    return error.removeprefix("ValueError: ") if error else error


def main(argv: list[str]) -> int:
    oracle_dir = oracle.oracle_dir()
    python = oracle_dir / ".venv" / "bin" / "python"
    files = [Path(a) for a in argv] or sorted(FIXTURES.glob("*.yaml"))
    todo = [(p, flat_config(p)) for p in files]
    todo = [(p, c) for p, c in todo if c is not None]
    with tempfile.TemporaryDirectory() as tmp:
        attention_in = Path(tmp) / "attention.json"
        attention_in.write_text(json.dumps([c for _, c in todo]))
        attention_out = Path(tmp) / "attention.out.json"
        subprocess.run([str(python), "oracle.py", str(attention_in), "-o", str(attention_out)],
                       cwd=oracle_dir, check=True, stderr=subprocess.DEVNULL)
        attention = json.loads(attention_out.read_text())
        prefill_in = Path(tmp) / "prefill.jsonl"
        prefill_in.write_text("".join(json.dumps(prefill_config(p)) + "\n" for p, _ in todo))
        prefill_out = Path(tmp) / "prefill.out.jsonl"
        subprocess.run([str(python), str(ROOT / "tools" / "mla_prefill_oracle.py"), "oracle", str(prefill_in),
                        "-o", str(prefill_out), "--oracle-dir", str(oracle_dir)],
                       check=True, stderr=subprocess.DEVNULL)
        prefill = [json.loads(x) for x in prefill_out.read_text().splitlines() if x.strip()]
    for (path, config), answer, pre in zip(todo, attention, prefill, strict=True):
        if "error" in answer:
            raise SystemExit(f"{path}: the oracle rejected the input: {answer['error']}")
        record = {
            "vllm_version": answer["vllm_version"],
            "attention": {
                "input": config,
                "backends": answer["backends"],
                "priority": answer["priority"],
                "selected": answer["selected"],
                "error": _strip(answer.get("selection_error")),
            },
            "prefill": {k: pre[k] for k in ("input", "backends", "asked", "selected", "error")},
        }
        target = path.with_suffix(".oracle.json")
        target.write_text(json.dumps(record, indent=1) + "\n")
        print(f"{target.relative_to(ROOT)}: {answer['selected'] or 'INVALID'} / prefill "
              f"{pre['selected'] or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
