#!/usr/bin/env python3
"""Compare the start-up memory fit check (``selector.memory.kv_fit`` and the MM001 / MM002
messages of ``schemas/reason-codes.yaml``) with vLLM's own ``check_enough_kv_cache_memory``.

Run with the oracle interpreter (vLLM 0.33.0 installed, no GPU needed)::

    /work/oracle/.venv/bin/python tools/memory_oracle.py [-v] [--write GOLDEN.jsonl.gz]

For every preset it plans the KV cache (as tools/kv_oracle.py does), then for a grid of
available-memory figures around what one ``max_model_len`` request needs it asks vLLM's
unmodified ``vllm.v1.core.kv_cache_planning.check_enough_kv_cache_memory`` whether it
raises and with which message, and compares that with attn-select's answer, word for word.
For the same figures it asks vLLM's ``_auto_fit_max_model_len`` (what ``--max-model-len
auto`` / -1 runs before that check, on the memory less the null block, as
``get_kv_cache_configs`` passes it: kv_cache_planning.py:1533-1548) for the length it
chooses, or its refusal, and the line it logs.
Exit status 0 when everything agrees. ``--write`` saves vLLM's answers (preset,
max_model_len, available bytes, vLLM's message or null, the auto-fit length or refusal
and log line) for tests/golden/test_memory_oracle.py, which checks them in CI without vLLM.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from types import SimpleNamespace

import kv_oracle as kvo
import oracle
from kv_oracle_backends import SCENARIO, SET
from vllm.v1.core import kv_cache_planning as planning
from vllm.v1.kv_cache_spec_registry import KVCacheSpecRegistry

from selector.catalog import load_catalog
from selector.kv import KVOptions, plan_model
from selector.memory import format_gib, kv_fit, startup_profile
from selector.models import list_presets, load_model

FACTORS = (-1.0, 0.0, 0.001, 0.3, 0.5, 0.999, 1.0, 1.001, 1.5, 3.0)


def ours(catalog, profile, specs, available: int, block_bytes: int, max_len: int,
         in_flight: int) -> str | None:
    fit = kv_fit(specs, available_bytes=available, pool_block_bytes=block_bytes,
                 max_model_len=max_len, in_flight_tokens=in_flight)
    memory = profile.memory
    if fit.outcome == "no_memory":
        return catalog.code(memory.no_memory_code).message
    if fit.outcome == "too_long":
        estimated = (memory.estimated_max_len.format(estimated=fit.estimated_max_len)
                     if fit.estimated_max_len > 0 else "")
        return catalog.code(memory.too_long_code).message.format(
            max_model_len=max_len, needed_gib=format_gib(fit.needed_bytes),
            available_gib=format_gib(fit.check_bytes), estimated_msg=estimated)
    return None


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def auto_fit(cfg, vspecs, available: int, max_len: int) -> tuple[object, str | None]:
    """vLLM's auto-fit for ``available`` bytes: (the length it sets or its error, its log)."""
    from vllm.v1.core.kv_cache_config_builder import get_kv_cache_config_builder

    cfg.device_config = SimpleNamespace(device_type="cuda")
    cfg.attention_config.hisparse_config = None
    cfg.cache_config.prefix_cache_retention_interval = None
    cfg.cache_config.num_gpu_blocks_override = None
    groups = planning.get_kv_cache_groups(cfg, dict(vspecs))
    builder = get_kv_cache_config_builder(cfg)
    check = available - planning._pool_bytes_per_block_from_builder(builder, cfg, groups)
    handler = _Lines()
    log = logging.getLogger(planning.__name__)
    log.addHandler(handler)
    level = log.level
    log.setLevel(logging.INFO)  # the harness quiets vLLM's INFO lines; these are answers
    # info_once logs only on the first local rank of an initialised process group and
    # once per message: here every answer logs its own line
    once = planning.logger.info_once
    planning.logger.info_once = lambda msg, *args, **_: planning.logger.info(msg, *args)
    cfg.model_config.max_model_len = max_len
    try:
        planning._auto_fit_max_model_len(builder, cfg, [groups], [check])
        answer: object = cfg.model_config.max_model_len
    except ValueError as exc:
        answer = str(exc)
    finally:
        cfg.model_config.max_model_len = max_len
        log.removeHandler(handler)
        log.setLevel(level)
        planning.logger.info_once = once
    fitted = [line for line in handler.lines if line.startswith("Auto-fit")]
    return answer, fitted[-1] if fitted else None


def main() -> int:
    verbose = "-v" in sys.argv
    KVCacheSpecRegistry._ensure_registered(SimpleNamespace())
    catalog = load_catalog()
    profile = startup_profile(catalog, "vllm==0.33.0")
    agree = differ = 0
    answers: list[dict[str, object]] = []
    for preset in list_presets():
        for max_len in (4096, 32768):
            options = KVOptions(**{**SCENARIO, "max_model_len": max_len})
            model = load_model(preset)
            plan = plan_model(model, SET, (options).for_engine(load_catalog().engine()))
            if not plan.ok or plan.capacity is None or not plan.entries:
                continue
            entry_backends = [kvo.vllm_backend(e.backend) for e in plan.entries]
            cfg = kvo.fake_config(model, options, plan, list(dict.fromkeys(entry_backends)))
            cached = [e for e in plan.entries if e.spec.kind != "encoder_only_attention"]
            vspecs = {e.name: kvo.vllm_spec(e.spec) for e in cached}
            needed = kv_fit([e.spec for e in cached], available_bytes=1 << 50,
                            pool_block_bytes=0, max_model_len=max_len,
                            in_flight_tokens=options.max_in_flight_tokens).needed_bytes
            for factor in FACTORS:
                available = int(needed * factor)
                try:
                    planning.check_enough_kv_cache_memory(cfg, dict(vspecs), available)
                    theirs = None
                except ValueError as exc:
                    theirs = str(exc)
                mine = ours(catalog, profile, [e.spec for e in cached], available,
                            plan.capacity.bytes_per_block, max_len,
                            options.max_in_flight_tokens)
                fitted, line = auto_fit(cfg, vspecs, available, max_len)
                answers.append({"preset": preset, "max_model_len": max_len,
                                "available": available, "vllm": theirs,
                                "auto_fit": fitted, "auto_fit_log": line})
                if mine == theirs:
                    agree += 1
                else:
                    differ += 1
                    print(f"DIFFER {preset} len={max_len} x{factor}\n  ours:   {mine}\n"
                          f"  theirs: {theirs}")
            if verbose:
                print(preset, max_len, "done")
    print(f"check_enough_kv_cache_memory: agree {agree}, differ {differ}")
    if "--write" in sys.argv:
        target = Path(sys.argv[sys.argv.index("--write") + 1])
        oracle.write_gz(target, "".join(json.dumps(answer, sort_keys=True) + "\n" for answer in answers))
        print(f"wrote {len(answers)} answers to {target}")
    return 0 if differ == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
