#!/usr/bin/env python3
"""vLLM's CUDA-graph mode after the engine config is built, per model: the runner type
vLLM resolves (``--runner auto``), whether the model is an encoder-decoder, and
``compilation_config.cudagraph_mode`` once ``VllmConfig.__post_init__`` has run (a pooling
model's full graphs become PIECEWISE, an encoder-decoder's modes other than NONE and
FULL_DECODE_ONLY become FULL_DECODE_ONLY: vllm/config/vllm.py, 0.33.0 :1950-1975), before
any attention backend's support is read.

Run with an oracle interpreter (vLLM installed, CPU only)::

    ORACLE_EXTRA_PATH=/work/oracle-extra /work/.venvs/oracle-0.33.0/bin/python \\
        tools/cudagraph_mode_oracle.py --out tests/golden/oracle/vllm-0.33.0/cudagraph-mode.jsonl.gz

No config given: every config the release's model reference built
(``tests/golden/vllm_models/vllm-<release>*.jsonl.gz``, status ok); Terratorch's needs
terratorch on the extra path (docs/models.md).

Each config is built as :mod:`vllm_model_reference` builds it (the same copy of the
config.json, dtype and maximum length), ``EngineArgs(...).create_engine_config()`` only: no
model class is instantiated. An answer is vLLM's config (``status: ok``) or vLLM's refusal
(``status: refused``, its words); anything else is the harness failing, printed, and
nothing is written.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import oracle
from vllm_model_reference import MODEL_DTYPE, _max_len, _prepare_dir, _refusal, _relative


def answer(config_path: Path, workdir: Path, resolve: str | None = None) -> dict[str, Any]:
    """vLLM's runner type and post-init CUDA-graph mode for one config.json; with
    ``resolve`` (``SUPPORT:BACKEND``, e.g. ``UNIFORM_BATCH:FlashAttnMLABackend``) also the
    mode ``CompilationConfig.resolve_cudagraph_mode_and_sizes`` makes of it for a backend of
    that ``AttentionCGSupport`` (``resolved_cudagraph_mode``)."""
    import vllm
    from vllm.engine.arg_utils import EngineArgs

    model_dir, notes = _prepare_dir(config_path, workdir)
    out: dict[str, Any] = {"config": _relative(config_path), "vllm_version": vllm.__version__}
    if notes:
        out["notes"] = notes
    try:
        vllm_config = EngineArgs(model=str(model_dir), skip_tokenizer_init=True,
                                 dtype=MODEL_DTYPE,
                                 max_model_len=_max_len(model_dir)).create_engine_config()
    except Exception as exc:  # vLLM's refusal, or the harness failing
        if not _refusal(exc):
            raise RuntimeError(f"{config_path}: {type(exc).__name__}: {exc}") from exc
        out.update(status="refused", error=f"{type(exc).__name__}: {exc}")
        return out
    model_config = vllm_config.model_config
    out.update(status="ok", architecture=model_config.architecture,
               runner_type=model_config.runner_type,
               pooling=model_config.pooler_config is not None,
               is_encoder_decoder=bool(model_config.is_encoder_decoder),
               cudagraph_mode=vllm_config.compilation_config.cudagraph_mode.name,
               compilation_mode=vllm_config.compilation_config.mode.name,
               max_cudagraph_capture_size=vllm_config.compilation_config.max_cudagraph_capture_size,
               cudagraph_capture_sizes=vllm_config.compilation_config.cudagraph_capture_sizes,
               max_num_seqs=vllm_config.scheduler_config.max_num_seqs,
               max_num_batched_tokens=vllm_config.scheduler_config.max_num_batched_tokens)
    if resolve is not None:
        from vllm.v1.attention.backend import AttentionCGSupport

        support, backend = resolve.split(":", 1)
        resolved = vllm_config.compilation_config.resolve_cudagraph_mode_and_sizes(
            AttentionCGSupport[support], backend)
        out.update(resolve_support=support, resolve_backend=backend,
                   resolved_cudagraph_mode=resolved.name)
    return out


def _built_configs() -> list[Path]:
    """The configs the release's model reference built (its answers' ``config``)."""
    import vllm

    folder = oracle.REPO / "tests" / "golden" / "vllm_models"
    paths = set()
    for answers in folder.glob(f"vllm-{vllm.__version__}*.jsonl.gz"):
        if answers.name.endswith("-prefix-caching.jsonl.gz"):
            continue
        paths |= {oracle.REPO / row["config"] for row in oracle.read_jsonl(answers)
                  if row.get("status") == "ok" and row.get("config")}
    return sorted(paths)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("configs", nargs="*", type=Path,
                        help="config.json files (default: those the model reference built)")
    parser.add_argument("--out", type=Path, required=True, help="a .jsonl.gz file")
    parser.add_argument("--resolve", metavar="SUPPORT:BACKEND",
                        help="also resolve the mode for a backend of this AttentionCGSupport")
    args = parser.parse_args(argv)
    oracle.start_models()
    configs = args.configs or _built_configs()
    results, failures = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(set(configs)):
            if path.stem in {"broken_layer_types"}:
                continue
            try:
                result = answer(path, Path(tmp), args.resolve)
            except RuntimeError as exc:
                failures.append(str(exc))
                print(f"HARNESS FAILURE {exc}"[:400], file=sys.stderr)
                continue
            results.append(result)
            print(f"{result['status']:7} {path}: {result.get('cudagraph_mode') or result.get('error')}"[:200],
                  file=sys.stderr)
    if failures:
        print(f"{len(failures)} harness failure(s): nothing written (fix the harness; a "
              "failure is never recorded as vLLM's answer)", file=sys.stderr)
        return 1
    oracle.write_jsonl_gz(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
