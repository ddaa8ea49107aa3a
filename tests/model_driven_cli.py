"""What the model-driven ``check`` tests share: a model folder of a config, ``check``'s
JSON report, and the aligned KV-cache groups of vLLM's recorded answer and of the report
in one comparable form (block size, page bytes per block, the layer indices)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tests.fuzz.test_config_fuzz import run_cli

__all__ = ["check_json", "model_folder", "tool_groups", "vllm_groups"]

Groups = list[tuple[int, int, tuple[int, ...]]]


def model_folder(parent: Path, name: str, config: Path) -> str:
    """A model folder ``parent/name`` holding ``config`` as its config.json (what
    ``vllm serve`` reads)."""
    folder = parent / name
    folder.mkdir()
    shutil.copy(config, folder / "config.json")
    return str(folder)


def check_json(model_dir: str, device: str, *flags: str, engine: str = "vllm==0.33.0"
               ) -> tuple[int, dict[str, Any], str]:
    """(exit code, the JSON report or {}, stderr) of ``attn-select check`` on
    ``vllm serve MODEL_DIR FLAGS``."""
    code, out, err = run_cli(["check", "--device", device, "--engine", engine, "--format", "json",
                              "--", "vllm", "serve", model_dir, *flags])
    return code, (json.loads(out) if out.strip() else {}), err


def vllm_groups(answer: dict[str, Any]) -> Groups:
    """vLLM's groups after the engine's block-size alignment (a recorded answer)."""
    return sorted((g["block_size"], g["page_size_bytes"], tuple(sorted(set(g["layers"]))))
                  for g in answer["aligned"]["groups"])


def tool_groups(report: dict[str, Any]) -> Groups:
    """The report's groups in the same form."""
    return sorted((g["manager_block_size"], g["bytes_per_block"],
                   tuple(sorted(set(g["layer_indices"])))) for g in report["plan"]["groups"])
