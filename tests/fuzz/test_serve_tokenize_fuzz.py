"""Any words after `vllm serve` parse or raise InputError naming a flag: argparse never
prints, exits or lets another exception out, whatever the words look like."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from selector.catalog import load_catalog
from selector.errors import InputError
from selector.inputs.serve.flags import serve_flags
from selector.inputs.serve.tokenize import tokenize

PIECES = ["-", "--", "=", ".", "_", " ", "-O", "-tp", "-cc", "-ac", "--model", "--block-size",
          "--served-model-name", "--api-key", "--no-", "--enforce-eager", "--attention-config",
          "--compilation-config", "--optimization-level", "--x", "3", "-3", "-.5", "1e3", "a",
          "{", "}", "llama-3.1-8b"]
WORDS = st.lists(st.sampled_from(PIECES), min_size=1, max_size=4).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.lists(WORDS | st.text(max_size=6), max_size=8))
def test_any_words_parse_or_name_the_flag(words: list[str]) -> None:
    table = serve_flags(load_catalog())
    try:
        raw = tokenize(["vllm", "serve", *words], table)
    except InputError as exc:
        assert exc.field and exc.exit_code == 2
        return
    assert set(raw.values) <= set(raw.order)
    assert raw.model is None or raw.model in words or any(raw.model in w for w in words)
