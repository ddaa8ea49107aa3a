"""Every attention-related start-up flag of each profiled release's parser is modelled,
refused as vLLM refuses it, or said not to be modelled (with what vLLM does with it):
never a silent pass (issue: the whole start-up, item 4).

A flag is attention-related by its name (attention, attn, MLA, KDA, GDN, MSA, KV cache,
block size, sliding window, cascade, context parallelism, FlashInfer, sparse indexer).
Each such flag of the release's own parser (``engine_flags`` of serve-flags.yaml, as
``tools/serve_flags.py`` asked vLLM) must be read by the settings (``HANDLED``), have its
values checked against the parser's ``choices`` (``flag_choices``: vLLM's argparse
refusal, SU045), or carry a note of what vLLM does with it (``flags.<flag>.note``, AS104
on the command line) or its removal (SU004)."""

from __future__ import annotations

import re

import pytest

from selector.catalog import load_catalog
from selector.inputs.serve import parse_serve_command
from selector.inputs.serve.flags import serve_flags
from selector.inputs.serve.settings import HANDLED

ATTENTION_RELATED = re.compile(
    r"attn|attention|kda|gdn|mla|msa|kv-cache|block-size|sliding|cascade|dcp|"
    r"context-parallel|flashinfer|sparse|indexer")
"""Names of the flags that choose or shape attention at start-up."""

NOT_ATTENTION = frozenset({
    "--kv-cache-metrics", "--no-kv-cache-metrics", "--kv-cache-metrics-sample",
    "--safetensors-prefetch-block-size",
})
"""Names the pattern catches that are not attention's: KV-cache usage metrics (logging)
and the weight loader's prefetch block."""

_CATALOG = load_catalog()
_RELEASES = sorted(name for name in _CATALOG.engine_dirs if name.startswith("vllm=="))


def _unaccounted(release: str) -> list[str]:
    table = serve_flags(_CATALOG, release)
    out = []
    for flag in sorted(table.engine_flags):
        if not ATTENTION_RELATED.search(flag) or flag in NOT_ATTENTION:
            continue
        spec = table.flags.get(flag)
        if flag in HANDLED or flag in table.flag_choices:
            continue
        if spec is not None and (spec.note or spec.removed):
            continue
        out.append(flag)
    return out


@pytest.mark.parametrize("release", _RELEASES)
def test_every_attention_flag_is_modelled_refused_or_said(release: str) -> None:
    assert _unaccounted(release) == []


@pytest.mark.parametrize("release", ["vllm==0.25.1", "vllm==0.33.0"])
def test_an_unmodelled_attention_flag_is_said_with_what_vllm_does(release: str) -> None:
    parsed = parse_serve_command(
        ["vllm", "serve", "llama-3.1-8b", "--mamba-block-size", "64",
         "--no-disable-cascade-attn"], device="H200", catalog=_CATALOG, engine=release)
    notes = {note.flag: note for note in parsed.notes}
    assert notes["--mamba-block-size"].code == "AS104"
    assert "CacheConfig.mamba_block_size" in notes["--mamba-block-size"].message
    assert "cascade attention" in notes["--no-disable-cascade-attn"].message


@pytest.mark.parametrize("release", ["vllm==0.30.0", "vllm==0.33.0"])
def test_an_invalid_kda_or_msa_decode_backend_is_vllms_refusal(release: str) -> None:
    parsed = parse_serve_command(
        ["vllm", "serve", "llama-3.1-8b", "--kda-decode-backend", "bogus",
         "--attention-config.minimax_m3_msa_decode_backend=bogus",
         "--attention-config.nope=1"], device="H200", catalog=_CATALOG, engine=release)
    errors = {note.code: note.message for note in parsed.notes if note.level == "error"}
    assert "invalid choice: 'bogus'" in errors["SU045"]
    assert "Input should be 'triton' or 'cutlass'" in errors["SU046"]
    assert "1 validation error for AttentionConfig" in errors["SU005"]
