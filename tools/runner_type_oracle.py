#!/usr/bin/env python3
"""The runner type vLLM resolves for each architecture of its registry with ``--runner
auto`` (``ModelConfig._get_default_runner_type``): ``pooling`` when the model class is a
pooling model, ``generate`` when it is a text-generation model, else the architecture
name's suffix default (``try_match_architecture_defaults``: ``...Model`` is pooling).
A pooling runner sets ``model_config.pooler_config``, and ``VllmConfig.__post_init__``
then turns full CUDA graphs into PIECEWISE (defaults.yaml ``cudagraph_model_overrides``).

Run with each release's oracle interpreter (vLLM installed, CPU only)::

    ORACLE_EXTRA_PATH=/work/oracle-extra /work/.venvs/oracle-0.33.0/bin/python \\
        tools/runner_type_oracle.py --out schemas/engines/vllm-0.33.0/runner_types.json

Every model class is loaded (its module imported, as vLLM's registry loads it) and asked
with vLLM's own ``is_pooling_model`` / ``is_text_generation_model``; the order of the
questions is ``_get_default_runner_type``'s (cited in the output with its lines). A class
whose module cannot be imported here is listed under ``not_inspected`` with the error: no
answer is made up for it. Not asked: a Sentence Transformers checkpoint's own pooling
config (``get_pooling_config``), which is a file beside config.json, not the architecture.
``tests/golden/test_cudagraph_mode_oracle.py`` checks the result against vLLM's
``ModelConfig`` for every config the model reference built.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path
from typing import Any

import oracle


def _lines(function: Any) -> str:
    lines, start = inspect.getsourcelines(function)
    path = Path(inspect.getsourcefile(function) or "")
    parts = path.parts
    relative = "/".join(parts[parts.index("vllm"):]) if "vllm" in parts else path.name
    return f"{relative}:{start}-{start + len(lines) - 1}"


def runner_types() -> dict[str, Any]:
    """The registry's architectures whose default runner is ``pooling``, and those whose
    class could not be loaded."""
    import vllm
    from vllm.config.model import ModelConfig, try_match_architecture_defaults
    from vllm.model_executor.models.interfaces_base import (
        is_pooling_model,
        is_text_generation_model,
    )
    from vllm.model_executor.models.registry import ModelRegistry

    pooling, failed = [], {}
    for arch in sorted(ModelRegistry.models):
        try:
            cls = ModelRegistry.models[arch].load_model_cls()
        except Exception as exc:  # the module's imports: not an answer
            failed[arch] = f"{type(exc).__name__}: {exc}"[:300]
            continue
        if is_pooling_model(cls):
            runner = "pooling"
        elif is_text_generation_model(cls):
            runner = "generate"
        else:
            match = try_match_architecture_defaults(arch)
            runner = match[1][0] if match else "generate"
        if runner == "pooling":
            pooling.append(arch)
    return {
        "vllm_version": vllm.__version__,
        "source": f"{_lines(ModelConfig._get_default_runner_type)} "
                  "(ModelConfig._get_default_runner_type); "
                  f"{_lines(try_match_architecture_defaults)} (try_match_architecture_defaults); "
                  "written by tools/runner_type_oracle.py",
        "pooling": pooling,
        "not_inspected": failed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True, help="a .json file")
    args = parser.parse_args(argv)
    oracle.start_models()
    answer = runner_types()
    args.out.write_text(json.dumps(answer, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(answer['pooling'])} pooling architectures, "
          f"{len(answer['not_inspected'])} not inspected", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
