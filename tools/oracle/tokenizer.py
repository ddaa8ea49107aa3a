"""The tokenizer stand-in: a word-level tokenizer written beside a config.json, where the
checkpoint's tokenizer files are not available offline and vLLM reads a tokenizer while
it builds something (the encoder's processor, a model class's pooler).

A stand-in cannot change what a recorder records: it gives each named token the id it is
given (else the next id), and every other word one unknown id. The callers say why that
is enough for their answer (``tools/encoder_oracle.py``: the processor expands each
placeholder from the item's size; ``tools/vllm_model_reference.py``: GritLM's pooler only
looks the ids up, gritlm.py:41-59 in 0.25.1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["write_tokenizer_stand_in"]

UNKNOWN = "<unk>"
"""The stand-in's unknown token, id 0."""


def write_tokenizer_stand_in(target: Path, vocab: Mapping[str, int], special: Sequence[str],
                             config: Mapping[str, Any] | None = None) -> None:
    """``tokenizer.json`` (a ``WordLevel`` model over ``vocab``, which holds ``<unk>``,
    split at whitespace, ``special`` added as special tokens) and ``tokenizer_config.json``
    (``PreTrainedTokenizerFast``, the unknown token, an unbounded ``model_max_length``,
    then ``config``'s keys) in ``target``."""
    import json

    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel(vocab=dict(vocab), unk_token=UNKNOWN))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False)
                                  for token in special])
    tokenizer.save(str(target / "tokenizer.json"))
    written: dict[str, Any] = {"tokenizer_class": "PreTrainedTokenizerFast",
                               "unk_token": UNKNOWN, "model_max_length": 1 << 30}
    written.update(config or {})
    (target / "tokenizer_config.json").write_text(json.dumps(written), encoding="utf-8")
