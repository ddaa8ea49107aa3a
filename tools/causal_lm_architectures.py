#!/usr/bin/env python3
"""Write ``schemas/models/causal_lm_architectures.yaml``: transformers'
``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` (model type -> causal-LM architecture), the table
vLLM reads when a multimodal model builds its language model from a sub-config without
``architectures`` (``VllmConfig.with_hf_config``, vllm/config/vllm.py:964-981 in 0.33.0),
kept to the architectures some profiled release's registry has. Run with an oracle
interpreter::

    /work/.venvs/oracle-0.33.0/bin/python tools/causal_lm_architectures.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "schemas" / "models" / "causal_lm_architectures.yaml"


def main() -> int:
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    archs: set[str] = set()
    for path in sorted((REPO / "schemas" / "engines").glob("*/model_registry.json")):
        for table in json.loads(path.read_text(encoding="utf-8"))["tables"].values():
            archs |= set(table)
    rows = {k: v for k, v in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items()) if v in archs}
    lines = [
        "# transformers' MODEL_FOR_CAUSAL_LM_MAPPING_NAMES (model type -> causal-LM architecture),",
        f"# transformers {transformers.__version__} (the vLLM 0.33.0 oracle venv), kept to the architectures",
        "# a profiled release's registry has. vLLM reads it when a wrapper builds its language model",
        "# from a sub-config that names no architectures (VllmConfig.with_hf_config,",
        "# vllm/config/vllm.py:964-981 in 0.33.0). Written by tools/causal_lm_architectures.py.",
        "causal_lm_architectures:",
        *(f"  {k}: {v}" for k, v in rows.items()),
    ]
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(rows)} model types -> {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
