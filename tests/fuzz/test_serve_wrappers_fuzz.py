"""A `vllm serve` line reads the same however it is pasted: as words, quoted as one
argument, or as `docker run [options] vllm/vllm-openai:TAG [args]` (the image's entry point
is `vllm serve`); and `diff` of an input against its own engine changes nothing."""

from __future__ import annotations

import shlex

from hypothesis import given, settings
from hypothesis import strategies as st

from selector.catalog import load_catalog
from selector.errors import InputError
from selector.inputs.serve import parse_serve_command
from selector.pipeline.diff import diff_inputs

ENGINE = "vllm==0.33.0"
FLAGS = st.lists(st.sampled_from([
    ["-tp", "2"], ["--max-model-len", "4096"], ["--kv-cache-dtype", "fp8"], ["--enforce-eager"],
    ["--block-size", "32"], ["--dtype", "half"], ["--max-model", "8k"], ["--kv-cach-dtype", "x"],
    ["--gpu-memory-utilization", "0.8"], ["--attention-backend", "FLASHINFER"],
    ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}'],
    ["-ac.flash_attn_version", "2"], ["extra"],
]), max_size=4).map(lambda groups: [w for g in groups for w in g])
DOCKER = st.lists(st.sampled_from([
    ["--gpus", "all"], ["-p", "8000:8000"], ["--rm"], ["-it"], ["--ipc=host"],
    ["-v", "/data:/data"], ["-e", "HF_TOKEN=x"], ["--runtime", "nvidia"]]), max_size=3
).map(lambda groups: [w for g in groups for w in g])


def _read(argv: list[str]) -> object:
    try:
        command = parse_serve_command(argv, device="H100", catalog=load_catalog(), engine=ENGINE)
    except InputError as exc:
        return ("error", exc.message, exc.field)
    return (command.deployment, [(n.code, n.message) for n in command.notes
                                 if n.code not in ("AS152",)])


@settings(max_examples=60, deadline=None)
@given(FLAGS, DOCKER)
def test_a_line_reads_the_same_however_it_is_pasted(flags: list[str], docker: list[str]) -> None:
    words = ["vllm", "serve", "qwen3-8b", *flags]
    plain = _read(words)
    assert _read([shlex.join(words)]) == plain
    assert _read(["docker", "run", *docker, "vllm/vllm-openai:v0.33.0", "qwen3-8b", *flags]) \
        == plain


@settings(max_examples=15, deadline=None)
@given(FLAGS)
def test_diff_against_the_same_engine_changes_nothing(flags: list[str]) -> None:
    catalog = load_catalog()
    try:
        results, errors = diff_inputs(["vllm", "serve", "qwen3-8b", *flags], ENGINE, ENGINE,
                                      catalog=catalog, devices=("H100",), serve_line=True)
    except InputError:
        return
    assert not errors and results
    assert not any(each.diff.verdict_changed for each in results)
