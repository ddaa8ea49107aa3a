#!/usr/bin/env python3
"""Seeded random generator of flat attention-selector configs (JSON Lines).

Each line is one config in the input format of the vLLM oracle harness
(``oracle.py``; see its README): ``device_capability``, ``head_size``,
``dtype``, ``kv_cache_dtype``, ``block_size``, the boolean flags and
``attn_type`` are always present; ``num_heads``, ``num_kv_heads``, ``model``
(the model stand-in) and ``attention_backend`` (explicit selection) appear
only sometimes.

    python tools/make_sample.py --family standard --n 20000 --seed 1 -o standard.jsonl
    python tools/make_sample.py --family mla --n 10000 --seed 2 -o mla.jsonl
    python tools/make_sample.py --family all --n 10000 --seed 3 --vllm-version 0.25.1

The output depends only on ``--family``, ``--n``, ``--seed`` and
``--vllm-version`` (stdlib ``random.Random``; no other source of randomness).
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")

Config = dict[str, Any]

CAPABILITIES = [
    "7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1",
]
# MLA models mostly run on Hopper / Blackwell.
MLA_CAPABILITY_WEIGHTS = [
    0.04, 0.04, 0.04, 0.04, 0.04, 0.04, 0.2, 0.22, 0.1, 0.08, 0.08, 0.08,
]

# Head sizes seen in real models (standard attention and MLA).
COMMON_HEAD_SIZES = [32, 40, 64, 72, 80, 96, 100, 112, 128, 160, 192, 256, 320, 512, 576]
# Unusual but plausible ones (not a multiple of 32, or rare sizes).
ODD_HEAD_SIZES = [33, 48, 56, 60, 104, 120, 136, 144, 176, 200, 224, 240, 288, 384, 448, 544]
# MLA: 576 = kv_lora_rank 512 + rope 64 (DeepSeek), 320 = 256 + 64, 512 = NoPE models.
MLA_HEAD_SIZES = [576, 512, 320]
MLA_OTHER_HEAD_SIZES = [64, 128, 192, 256, 288, 384, 448, 544, 640]

DTYPES = ["bfloat16", "float16", "float32"]
DTYPE_WEIGHTS = [0.45, 0.4, 0.15]
MLA_DTYPE_WEIGHTS = [0.7, 0.22, 0.08]

# vLLM's CacheDType literal, per version (checked against the installed wheels:
# typing.get_args(vllm.config.cache.CacheDType)).
KV_CACHE_DTYPES: dict[str, list[str]] = {
    "0.33.0": [
        "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
        "fp8_ds_mla", "nvfp4_ds_mla", "turboquant_k8v4", "turboquant_4bit_nc",
        "turboquant_k3v4_nc", "turboquant_3bit_nc", "octave_k3v4", "octave_k3v3",
        "octave_k3v3_compact", "ultraquant_4bit", "int4_per_token_head",
        "int8_per_token_head", "fp8_per_token_head", "nvfp4", "nvfp4_4over6",
    ],
    "0.25.1": [
        "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
        "fp8_ds_mla", "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc",
        "turboquant_3bit_nc", "int4_per_token_head", "int8_per_token_head",
        "fp8_per_token_head", "nvfp4",
    ],
}

ATTN_TYPES = ["decoder", "encoder", "encoder_only", "encoder_decoder"]

# Backends in some CUDA priority list (the oracle's default evaluation set).
STANDARD_BACKENDS: dict[str, list[str]] = {
    "0.33.0": [
        "FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT",
        "TRITON_FLASH_ATTN", "TRITON_FLASHINFER",
    ],
    "0.25.1": ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT"],
}
MLA_BACKENDS: dict[str, list[str]] = {
    "0.33.0": [
        "FLASH_ATTN_MLA", "FLASHMLA", "FLASHINFER_MLA", "TRITON_MLA", "FLASH_ATTN_MLA_SPARSE",
        "FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM90", "TOKENSPEED_MLA", "CUTLASS_MLA",
        "FLASHINFER_MLA_SPARSE", "FLASH_ATTN_MLA_SPARSE_FA4", "FLASHINFER_MLA_SPARSE_SM120",
    ],
    "0.25.1": [
        "FLASH_ATTN_MLA", "FLASHMLA", "FLASHINFER_MLA", "TRITON_MLA", "FLASH_ATTN_MLA_SPARSE",
        "FLASHMLA_SPARSE", "TOKENSPEED_MLA", "CUTLASS_MLA", "FLASHINFER_MLA_SPARSE",
        "FLASHINFER_MLA_SPARSE_SM120",
    ],
}
# Registered backends that import on the oracle but are in no CUDA priority
# list: reachable only through --attention-backend (oracle README, "--backends").
EXPLICIT_ONLY_BACKENDS: dict[str, list[str]] = {
    "0.33.0": ["FLASH_ATTN_DIFFKV", "TRITON_ATTN_DIFFKV", "B12X", "HPC_ATTN"],
    "0.25.1": [
        "FLASH_ATTN_DIFFKV", "TRITON_ATTN_DIFFKV", "HPC_ATTN", "CPU_ATTN", "XPU_MLA_SPARSE",
    ],
}
VERSIONS = sorted(KV_CACHE_DTYPES)

NUM_HEADS = [1, 2, 4, 8, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 96, 128]
MLA_NUM_HEADS = [8, 16, 20, 32, 40, 64, 128]

DEEPSEEK_V3: dict[str, int] = {
    "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
}
DEEPSEEK_V32: dict[str, int] = {**DEEPSEEK_V3, "index_topk": 2048}
# Values for perturbing one MLA dimension.
MLA_DIM_VALUES: dict[str, list[int]] = {
    "kv_lora_rank": [128, 256, 448, 512, 1024],
    "qk_rope_head_dim": [0, 32, 64, 128],
    "qk_nope_head_dim": [1, 64, 96, 128, 192, 256],
    "v_head_dim": [64, 128, 192, 256, 512],
    "index_topk": [256, 512, 1024, 2048, 4096],
}


def _pick(rng: random.Random, items: Sequence[T], weights: Sequence[float] | None = None) -> T:
    if weights is None:
        return items[rng.randrange(len(items))]
    return rng.choices(list(items), weights=list(weights), k=1)[0]


def block_size(rng: random.Random, mla: bool = False) -> int | None:
    """null, or 1..1024 biased toward powers of two and multiples of 16
    (MLA: also toward 64, the FlashMLA page size)."""
    if mla and rng.random() < 0.25:
        return 64
    r = rng.random()
    if r < 0.4:
        return None
    if r < 0.65:
        return 1 << rng.randint(4, 7)  # 16 .. 128, the common ones
    if r < 0.77:
        return 1 << rng.randint(0, 10)  # 1 .. 1024
    if r < 0.92:
        return 16 * rng.randint(1, 64)  # 16 .. 1024
    return rng.randint(1, 1024)


def head_size(rng: random.Random, mla: bool) -> int:
    r = rng.random()
    if mla:
        if r < 0.75:
            return _pick(rng, MLA_HEAD_SIZES, [0.6, 0.25, 0.15])
        if r < 0.9:
            return _pick(rng, MLA_OTHER_HEAD_SIZES)
        return rng.randint(32, 576)
    if r < 0.8:
        return _pick(rng, COMMON_HEAD_SIZES)
    if r < 0.93:
        return _pick(rng, ODD_HEAD_SIZES)
    return rng.randint(32, 576)


def kv_cache_dtype(rng: random.Random, version: str, mla: bool) -> str:
    kvs = _vocabulary(version)["kv_cache_dtypes"]
    r = rng.random()
    if r < 0.4:
        return "auto"
    if r < 0.52:
        return _pick(rng, ["bfloat16", "float16"])
    if r < 0.8:
        common = ("fp8", "fp8_e4m3", "fp8_ds_mla", "nvfp4_ds_mla") if mla else (
            "fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4")
        return _pick(rng, [k for k in common if k in kvs])
    return _pick(rng, kvs)


def mla_hf_text_config(rng: random.Random) -> dict[str, int]:
    """DeepSeek-V3 / V3.2 MLA dims, sometimes perturbed or with a key missing."""
    base = dict(DEEPSEEK_V32 if rng.random() < 0.5 else DEEPSEEK_V3)
    r = rng.random()
    if r < 0.55:
        return base
    if r < 0.85:  # perturb one or two dims
        for _ in range(rng.randint(1, 2)):
            key = _pick(rng, sorted(MLA_DIM_VALUES))
            base[key] = _pick(rng, MLA_DIM_VALUES[key])
        return base
    del base[_pick(rng, sorted(base))]  # a model that lacks one attribute
    return base


def standard_model(rng: random.Random, cfg: Config) -> None:
    """Attach the model stand-in: num_kv_heads (+ num_heads) or a model object."""
    nh = _pick(rng, [h for h in NUM_HEADS if h >= 2])
    divisors = [d for d in (1, 2, 4, 8, 16, 32, 64, 128) if nh % d == 0]
    nkv = _pick(rng, divisors)
    cfg["num_heads"] = nh
    if rng.random() < 0.75:
        cfg["num_kv_heads"] = nkv
    else:
        model: dict[str, Any] = {"num_kv_heads": nkv}
        if rng.random() < 0.5:
            model["num_attention_heads"] = nh
        if rng.random() < 0.3:
            model["hf_text_config"] = {}
        cfg["model"] = model


def mla_model(rng: random.Random, cfg: Config) -> None:
    hf = mla_hf_text_config(rng)
    cfg["num_heads"] = cfg.get("num_heads") or _pick(rng, MLA_NUM_HEADS)
    model: dict[str, Any] = {"num_kv_heads": 1, "hf_text_config": hf}
    if rng.random() < 0.2:
        model["num_attention_heads"] = cfg["num_heads"]
    cfg["model"] = model
    # realistic models have head_size = kv_lora_rank + qk_rope_head_dim
    if rng.random() < 0.7 and "kv_lora_rank" in hf and "qk_rope_head_dim" in hf:
        cfg["head_size"] = hf["kv_lora_rank"] + hf["qk_rope_head_dim"]


def explicit_backend(rng: random.Random, version: str, mla: bool) -> str:
    r = rng.random()
    vocabulary = _vocabulary(version)
    if r < 0.2:
        return _pick(rng, vocabulary["explicit_only"])
    own, other = (("mla_backends", "standard_backends") if mla
                  else ("standard_backends", "mla_backends"))
    if r < 0.85:
        return _pick(rng, vocabulary[own])
    return _pick(rng, vocabulary[other])


def make_config(rng: random.Random, family: str, version: str) -> Config:
    """One config. family: "standard" or "mla"."""
    mla = family == "mla"
    use_mla = True if mla else rng.random() < 0.05
    cfg: Config = {
        "device_capability": _pick(rng, CAPABILITIES, MLA_CAPABILITY_WEIGHTS if mla else None),
        "head_size": head_size(rng, use_mla),
        "dtype": _pick(rng, DTYPES, MLA_DTYPE_WEIGHTS if mla else DTYPE_WEIGHTS),
        "kv_cache_dtype": kv_cache_dtype(rng, version, use_mla),
        "block_size": block_size(rng, use_mla),
        "use_mla": use_mla,
        "has_sink": rng.random() < (0.03 if mla else 0.1),
        "use_sparse": rng.random() < (0.35 if mla else 0.04),
        "use_mm_prefix": rng.random() < (0.03 if mla else 0.1),
        "use_per_head_quant_scales": rng.random() < 0.05,
        "has_sliding_window": rng.random() < (0.03 if mla else 0.15),
        "use_non_causal": rng.random() < (0.05 if mla else 0.08),
        "attn_type": _pick(rng, ATTN_TYPES, [0.79, 0.07, 0.07, 0.07] if not mla
                           else [0.91, 0.03, 0.03, 0.03]),
    }
    if rng.random() < (0.7 if mla else 0.35):
        cfg["num_heads"] = _pick(rng, MLA_NUM_HEADS if mla else NUM_HEADS)
    if mla:
        if rng.random() < 0.45:
            mla_model(rng, cfg)
    elif rng.random() < 0.25:
        standard_model(rng, cfg)
    if rng.random() < 0.1:
        cfg["attention_backend"] = explicit_backend(rng, version, use_mla)
    return cfg


# Vocabularies of releases given by the caller (``register_vocabulary``), e.g.
# read from the release itself by tools/release_probe.py.
_EXTRA_VOCABULARIES: dict[str, dict[str, list[str]]] = {}
VOCABULARY_KEYS = ("kv_cache_dtypes", "standard_backends", "mla_backends", "explicit_only")


def register_vocabulary(version: str, vocabulary: dict[str, list[str]]) -> None:
    """Draw configs of ``version`` from ``vocabulary`` (keys ``VOCABULARY_KEYS``)."""
    missing = [k for k in VOCABULARY_KEYS if not vocabulary.get(k)]
    if missing:
        raise ValueError(f"vocabulary of {version} lacks {missing}")
    _EXTRA_VOCABULARIES[version] = {k: list(vocabulary[k]) for k in VOCABULARY_KEYS}


def _vocabulary(version: str) -> dict[str, list[str]]:
    if version in _EXTRA_VOCABULARIES:
        return _EXTRA_VOCABULARIES[version]
    return {"kv_cache_dtypes": KV_CACHE_DTYPES[version],
            "standard_backends": STANDARD_BACKENDS[version],
            "mla_backends": MLA_BACKENDS[version],
            "explicit_only": EXPLICIT_ONLY_BACKENDS[version]}


def generate(family: str, n: int, seed: int, version: str = "0.33.0") -> list[Config]:
    """n configs; deterministic for (family, n, seed, version) and the version's
    vocabulary (built in for VERSIONS, else given by ``register_vocabulary``)."""
    if family not in ("standard", "mla", "all"):
        raise ValueError(f"unknown family {family!r}")
    if version not in KV_CACHE_DTYPES and version not in _EXTRA_VOCABULARIES:
        raise ValueError(f"unknown vLLM version {version!r}; one of {VERSIONS} "
                         "(or register_vocabulary)")
    rng = random.Random(seed)
    out: list[Config] = []
    for _ in range(n):
        fam = family
        if fam == "all":
            fam = "mla" if rng.random() < 0.4 else "standard"
        out.append(make_config(rng, fam, version))
    return out


# --------------------------------------------------------------------------- #
# ROCm: configs in the input format of the ROCm oracle (rocm_oracle.py)        #
# --------------------------------------------------------------------------- #

# The gfx architectures of the catalog's AMD devices (schemas/devices.yaml,
# platform rocm; tests/unit/test_rocm_sample.py keeps the two equal), weighted
# toward the Instinct parts vLLM's ROCm backends are written for.
ROCM_ARCHS = ["gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1151", "gfx1201"]
ROCM_ARCH_WEIGHTS = [0.1, 0.4, 0.25, 0.1, 0.05, 0.1]
# The VLLM_ROCM_* switches (and VLLM_BATCH_INVARIANT) the oracle applies; each
# config leaves a switch unset (vLLM's default) or sets one of its values.
ROCM_ENV_VALUES: dict[str, list[str | None]] = {
    "VLLM_ROCM_USE_AITER": [None, None, "0", "1", "1", "1"],
    "VLLM_ROCM_USE_AITER_MHA": [None, None, None, "0", "1"],
    "VLLM_ROCM_USE_AITER_MLA": [None, None, None, "0", "1"],
    "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": [None, None, None, "1"],
    "VLLM_ROCM_SHUFFLE_KV_CACHE_LAYOUT": [None, None, None, "1"],
    "VLLM_ROCM_USE_AITER_TRITON_SPARSE_MLA": [None, None, None, "1"],
    "VLLM_BATCH_INVARIANT": [None, None, None, None, None, "1"],
}
ROCM_BLOCK_SIZES = [1, 8, 16, 32, 48, 64, 128, 256, 528, 544, 1024]
# AITER MLA's head rules (16 or 128, padded counts) make these the interesting ones.
ROCM_MLA_NUM_HEADS = [1, 2, 4, 8, 16, 16, 24, 32, 48, 64, 96, 128, 128, 256]


def rocm_env(rng: random.Random) -> dict[str, str]:
    env: dict[str, str] = {}
    for key in sorted(ROCM_ENV_VALUES):
        value = _pick(rng, ROCM_ENV_VALUES[key])
        if value is not None:
            env[key] = value
    return env


def make_rocm_config(rng: random.Random, family: str, kv_cache_dtypes: Sequence[str],
                     backends: Sequence[str]) -> Config:
    """One config of the ROCm oracle. family: "standard" or "mla"."""
    mla = family == "mla"
    use_mla = True if mla else rng.random() < 0.05
    r = rng.random()
    if r < 0.4:
        kv = "auto"
    elif r < 0.5:
        kv = _pick(rng, ["bfloat16", "float16"])
    elif r < 0.75:
        kv = _pick(rng, [k for k in ("fp8", "fp8_e4m3", "fp8_e5m2") if k in kv_cache_dtypes])
    else:
        kv = _pick(rng, list(kv_cache_dtypes))
    bs: int | None
    if rng.random() < 0.45:
        bs = None
    elif rng.random() < 0.8:
        bs = _pick(rng, ROCM_BLOCK_SIZES)
    else:
        bs = block_size(rng, use_mla)
    cfg: Config = {
        "gcn_arch": _pick(rng, ROCM_ARCHS, ROCM_ARCH_WEIGHTS),
        "aiter_installed": rng.random() < 0.7,
        "env": rocm_env(rng),
        "head_size": head_size(rng, use_mla),
        "dtype": _pick(rng, DTYPES, MLA_DTYPE_WEIGHTS if mla else DTYPE_WEIGHTS),
        "kv_cache_dtype": kv,
        "block_size": bs,
        "use_mla": use_mla,
        "has_sink": rng.random() < (0.03 if mla else 0.1),
        "use_sparse": rng.random() < (0.25 if mla else 0.03),
        "use_mm_prefix": rng.random() < (0.03 if mla else 0.08),
        "use_per_head_quant_scales": rng.random() < 0.05,
        "has_sliding_window": rng.random() < (0.03 if mla else 0.15),
        "use_non_causal": rng.random() < 0.08,
        "attn_type": _pick(rng, ATTN_TYPES, [0.79, 0.07, 0.07, 0.07] if not mla
                           else [0.91, 0.03, 0.03, 0.03]),
    }
    if mla or rng.random() < 0.35:
        cfg["num_heads"] = _pick(rng, ROCM_MLA_NUM_HEADS if mla else NUM_HEADS)
    if rng.random() < 0.1:
        cfg["attention_backend"] = _pick(rng, list(backends))
    return cfg


def generate_rocm(family: str, n: int, seed: int, kv_cache_dtypes: Sequence[str],
                  backends: Sequence[str]) -> list[Config]:
    """n ROCm configs; deterministic for (family, n, seed) and the release's
    ``CacheDType`` values and registered ROCm backends."""
    if family not in ("standard", "mla"):
        raise ValueError(f"unknown family {family!r}")
    rng = random.Random(seed)
    return [make_rocm_config(rng, family, kv_cache_dtypes, backends) for _ in range(n)]


def generate_rocm_pinned(n: int, seed: int, kv_cache_dtypes: Sequence[str],
                         rocm_backends: Sequence[str], pinned: Sequence[str]) -> list[Config]:
    """n ROCm configs, each pinning one name of ``pinned`` (every name of the release's
    ``AttentionBackendEnum``, in turn, as ``--attention-backend`` does): standard and MLA
    configs alternate; deterministic for (n, seed) and the release's vocabulary."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        cfg = make_rocm_config(rng, "mla" if i % 2 else "standard", kv_cache_dtypes,
                               rocm_backends)
        cfg["attention_backend"] = pinned[i % len(pinned)]
        out.append(cfg)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", choices=["standard", "mla", "all"], default="all")
    ap.add_argument("--n", type=int, default=1000, help="number of configs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vllm-version", default="0.33.0",
                    help="which vLLM's kv_cache_dtype values and backend names to draw "
                         f"(built in: {', '.join(VERSIONS)}; others need --vocabulary)")
    ap.add_argument("--vocabulary", help="JSON file with the release's "
                    + ", ".join(VOCABULARY_KEYS) + " (e.g. from tools/conformance.py)")
    ap.add_argument("--json-list", action="store_true",
                    help="write one JSON list (the oracle's input) instead of JSON Lines")
    ap.add_argument("-o", "--output", help="output file (default: stdout)")
    a = ap.parse_args(argv)
    if a.vocabulary:
        with open(a.vocabulary, encoding="utf-8") as f:
            register_vocabulary(a.vllm_version, json.load(f))
    elif a.vllm_version not in VERSIONS:
        ap.error(f"--vllm-version {a.vllm_version} is not built in; give --vocabulary")
    configs = generate(a.family, a.n, a.seed, a.vllm_version)
    text = (json.dumps(configs) + "\n" if a.json_list
            else "".join(json.dumps(c) + "\n" for c in configs))
    if a.output:
        with open(a.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
