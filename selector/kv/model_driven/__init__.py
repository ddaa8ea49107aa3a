"""Backends a model's own layers choose (vLLM's "model-driven" members of
``AttentionBackendEnum``: DeepSeek-V4's ``FLASHMLA_SPARSE_DSV4`` /
``FLASHINFER_MLA_SPARSE_DSV4`` and their kin), as data.

The platform's priority list never sees these layers: the model's layer code maps the
``--attention-backend`` given (or the GPU) to its own attention class, refuses some
names with its own text and ignores the rest, resolves the KV-cache dtype its layout
needs, and registers several caches per decoder layer (a sliding-window MLA cache,
the compressed MLA cache, the indexer's K cache, the compressors' state caches), each
with its own block size. vLLM groups them with the block-outermost packed grouping
(``_get_packed_kv_cache_groups``), after ``update_block_size_for_backend`` set the
compressed caches' block to the backend's kernel block. Step5's layers (0.33.0) pin
their own backends instead (STEP5_DSA where the sparse_config applies, the split-KV
FLASH_ATTN elsewhere), whatever ``--attention-backend`` says; a DSA layer adds a sparse
summary cache and a CSA tail ring (a ``CircularBufferSpec``), which the packed grouping
keeps as a state bucket. DeepSeek-V4.1's layers (0.30.0-0.33.0) register the compressed
caches only on ``kv_source_layer_ids``, its compressor state a ``CircularBufferSpec``; its
kernel block and layer class may depend on the GPU, its default on a probed kernel build.
Dots3Note's layers pin a padded sparse MLA or a sliding TRITON_MLA by ``layer_types``.

Data: ``model-driven.yaml`` of the engine profile (inherited whole; a release that
changes a fact gives a complete file). Each fact cites vLLM's source; vLLM's own
answers (``tools/model_driven_reference.py``) are compared by
``tests/golden/test_model_driven.py``.

The package, one job a module (each imports only those above it):

- ``rules``: the data model of ``model-driven.yaml``;
- ``load``: the engine's file loaded, its model-driven names, a model's rule;
- ``expressions``: the rule's expressions evaluated (``MissingConfigFieldError``);
- ``environment``: what they read: the config's fields, each decoder layer's environment;
- ``backends``: the layers' backends as the planner's ``BackendKVFacts``;
- ``selection``: the layer code's backend choice, KV-cache dtype and refusals;
- ``caches``: the cache modules each layer registers, with their specs;
- ``grouping``: the release's grouping of those specs;
- ``block``: the block the caches take (``update_block_size_for_backend``);
- ``plan``: the KV plan of the model-driven layers.
"""

from __future__ import annotations

from selector.kv.model_driven.backends import kernel_block, own_backend_facts
from selector.kv.model_driven.block import aligned_block
from selector.kv.model_driven.caches import driven_caches, layer_backends
from selector.kv.model_driven.environment import compress_ratios, layer_kinds, layer_types
from selector.kv.model_driven.expressions import MissingConfigFieldError
from selector.kv.model_driven.grouping import packed_groups
from selector.kv.model_driven.load import driven_rule, load_model_driven, model_driven_names
from selector.kv.model_driven.plan import plan_driven
from selector.kv.model_driven.rules import DrivenBackend, DrivenCache, DrivenModel, ModelDrivenData
from selector.kv.model_driven.selection import (
    DrivenSelection,
    driven_backend,
    layer_refusal,
    resolve_cache_dtype,
    select_driven,
)

__all__ = [
    "DrivenBackend",
    "DrivenCache",
    "DrivenModel",
    "DrivenSelection",
    "MissingConfigFieldError",
    "ModelDrivenData",
    "aligned_block",
    "compress_ratios",
    "driven_backend",
    "driven_caches",
    "driven_rule",
    "kernel_block",
    "layer_backends",
    "layer_kinds",
    "layer_refusal",
    "layer_types",
    "load_model_driven",
    "model_driven_names",
    "own_backend_facts",
    "packed_groups",
    "plan_driven",
    "resolve_cache_dtype",
    "select_driven",
]
