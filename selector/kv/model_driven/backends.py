"""The facts of the backends the model's layers build (kernel block sizes, CUDA-graph
support), as the release's ``model-driven.yaml`` states them, in the planner's
``BackendKVFacts``."""

from __future__ import annotations

from collections.abc import Sequence

from selector.catalog import Catalog, CatalogError
from selector.kv.backend_facts import BackendKVFacts, BlockSizeRule, MultipleOf
from selector.kv.model_driven.expressions import evaluate
from selector.kv.model_driven.load import load_model_driven
from selector.kv.model_driven.rules import DrivenBackend, DrivenModel, ModelDrivenData
from selector.models.facts import ModelFacts

__all__ = [
    "backend_facts",
    "block_size_rules",
    "exact_kernel_sizes",
    "kernel_block",
    "kernel_sizes",
    "own_backend_facts",
]


def kernel_block(backend: DrivenBackend, cc_major: int) -> int | None:
    """The backend's kernel block size on a GPU of ``cc_major`` (None: none stated)."""
    if backend.kernel_block_size:
        return int(evaluate(backend.kernel_block_size, {"cc_major": cc_major}))
    return backend.kernel_block_sizes[0] if backend.kernel_block_sizes else None


def kernel_sizes(name: str, rule: DrivenModel, data: ModelDrivenData, selected: str
                 ) -> tuple[int | str, ...]:
    """The kernel block sizes a cache's backend ``name`` states (an enum member's, else
    the rule's or the release's helper backend's), with ``selected`` chosen."""
    if name in data.backends:
        return data.backends[name].kernel_block_sizes
    helper = rule.layer_backends.get(name) or data.layer_backends.get(name)
    if helper is None:
        raise CatalogError(f"{rule.source}: {name} (a cache's backend, with {selected}) "
                           "is not in model-driven.yaml")
    return helper.kernel_block_sizes


def block_size_rules(sizes: Sequence[int | str]) -> tuple[BlockSizeRule, ...]:
    """Kernel block sizes as block-size rules (``multiple_of N``: ``MultipleOf(N)``; none
    stated: AttentionBackend's default, ``[MultipleOf(1)]``)."""
    rules = tuple(s if isinstance(s, int) else MultipleOf(multiple_of=int(s.split()[-1]))
                  for s in sizes)
    return rules or (MultipleOf(multiple_of=1),)


def exact_kernel_sizes(sizes: Sequence[int | str]) -> tuple[int, ...]:
    """Exact kernel block sizes (a ``multiple_of N`` entry of a helper is not one)."""
    return tuple(s for s in sizes if isinstance(s, int))


def backend_facts(name: str, rule: DrivenModel, data: ModelDrivenData, selected: str
                  ) -> BackendKVFacts:
    """The planner's facts of backend ``name`` a cache module names, with ``selected``
    chosen (an enum member: an MLA backend; else the rule's helper backend)."""
    if name in data.backends:
        b = data.backends[name]
        return BackendKVFacts(name=name, class_name=b.class_path.rsplit(".", 1)[-1],
                              kernel_block_sizes=b.kernel_block_sizes,
                              cudagraph_support=b.cudagraph_support or "NEVER",
                              reorder_batch_threshold=b.reorder_batch_threshold, is_mla=True)
    helper = rule.layer_backends[name]
    return BackendKVFacts(name=name, class_name=helper.class_name or name,
                          cudagraph_support=helper.support_with(selected))


def own_backend_facts(model: ModelFacts, engine: str, catalog: Catalog
                      ) -> dict[str, BackendKVFacts]:
    """The facts of the backends the model's layers build themselves (a layer's
    ``own_backend``, its indexer's ``backend``, its conv cache's ``backend``), by name, as the release's
    ``model-driven.yaml`` states them; a name the release does not state is left out (the
    planner then refuses the model)."""
    names = {layer.own_backend for layer in model.layers if layer.own_backend}
    indexers = {layer.indexer.backend for layer in model.layers
                if layer.indexer is not None and layer.indexer.backend}
    indexers |= {layer.conv_cache.backend for layer in model.layers if layer.conv_cache}
    indexers |= {layer.indexer.tail.backend for layer in model.layers
                 if layer.indexer is not None and layer.indexer.tail is not None}
    pools = {layer.indexer.backend: layer.indexer.tokens_per_state for layer in model.layers
             if layer.indexer is not None and layer.indexer.backend}
    data = load_model_driven(engine, catalog)
    if data is None or not names | indexers:
        return {}
    out: dict[str, BackendKVFacts] = {}
    for name in sorted(names & set(data.backends)):
        b = data.backends[name]
        out[name] = BackendKVFacts(name=name, class_name=b.class_path.rsplit(".", 1)[-1],
                                   kernel_block_sizes=b.kernel_block_sizes,
                                   cudagraph_support=b.cudagraph_support or "NEVER",
                                   reorder_batch_threshold=b.reorder_batch_threshold)
    for name in sorted(indexers & set(data.layer_backends)):
        helper = data.layer_backends[name]
        sizes = exact_kernel_sizes(helper.kernel_block_sizes) or tuple(
            pools.get(name, 1) * states for states in helper.kernel_block_states)
        out[name] = BackendKVFacts(name=name, class_name=helper.class_name or name,
                                   cudagraph_support=helper.cudagraph_support,
                                   supported_layouts=helper.supported_layouts,
                                   # none stated: AttentionBackend's default, [MultipleOf(1)]
                                   **({"kernel_block_sizes": sizes} if sizes else {}))
    return out
