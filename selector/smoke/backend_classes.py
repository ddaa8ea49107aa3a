"""The smoke through vLLM's own backend classes, where vLLM is importable.

The kernel call contract (``kernel-calls.yaml``) names vLLM's backend classes as the first
provider of a backend (``kind: backend_classes``). For a plan, vLLM's registry gives the
class (``AttentionBackendEnum[plan.backend].get_class()``) and the step runs the code a
vLLM worker runs, on the smoke's batch:

* a ``VllmConfig`` of a stand-in model (a ``config.json`` with the plan's heads, head size
  and dtype, MLA dimensions for an MLA plan: the contract's ``stand_in_model``) so the
  backend's metadata builder reads the plan's geometry from vLLM's own config;
* each layer's KV cache in ``backend.get_kv_cache_shape(...)``, stored in the order of
  ``get_kv_cache_stride_order()`` where the backend has one, as vLLM's runner allocates it;
* ``CommonAttentionMetadata`` from the smoke's batch (query start locations, seq lens,
  block table, slot mapping, as the plan says), the batch reordered decode-first when the
  builder sets ``reorder_batch_threshold``, then ``builder.build(0, common)`` once;
* per layer vLLM's own attention layer (``Attention``, ``MLAAttention``) built with the
  backend class pinned and the plan's scale, window, soft cap, sinks and KV-cache dtype:
  the layer registers itself where the builder looks for it, constructs the backend's impl
  (``get_impl_cls()(...)``) and holds vLLM's quantization scales, set to the plan's (as
  weight loading sets them); the step's new tokens are written by
  ``impl.do_kv_cache_update`` unless the backend's ``forward`` writes them; the query is
  quantized by the layer's ``query_quant`` where the layer has one; then
  ``impl.forward(layer, query, key, value, kv_cache, attn_metadata, output=...)``, an MLA
  plan's absorbed decode query through ``impl.forward_mqa(q, kv_cache, attn_metadata,
  layer)``.

torch is passed in; vLLM is imported by name (:func:`load_vllm`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from selector.errors import CannotRunHereError
from selector.smoke.batch import BatchSpec
from selector.smoke.contract import ProviderSpec, resolve_arguments
from selector.smoke.metadata import (
    FlashAttentionMetadata,
    build_common_metadata,
    build_flash_attn_metadata,
    decode_first_permutation,
)
from selector.smoke.plan import SmokePlan
from selector.smoke.steps import TimedLaunch
from selector.smoke.tensors import PagedKvCache, cache_dtype, torch_dtype

__all__ = ["VllmBackendStep", "VllmRuntime", "load_vllm"]

Tensor: TypeAlias = Any
Torch: TypeAlias = Any


@dataclass
class VllmRuntime:
    """vLLM's modules the step calls, imported once."""

    version: str
    config: Any
    """``vllm.config``: ``VllmConfig``, ``ModelConfig``, ``set_current_vllm_config``..."""
    registry: Any
    """``vllm.v1.attention.backends.registry`` (``AttentionBackendEnum``)."""
    backend_api: Any
    """``vllm.v1.attention.backend`` (``CommonAttentionMetadata``)."""
    kv_cache_interface: Any
    attention_layer: Any
    """``vllm.model_executor.layers.attention.attention`` (``Attention``)."""
    mla_layer: Any
    """``vllm.model_executor.layers.attention.mla_attention`` (``MLAAttention``)."""
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="attn-select-vllm-")))

    def backend_class(self, name: str) -> Any:
        enum = self.registry.AttentionBackendEnum
        if name not in enum.__members__:
            raise CannotRunHereError(f"vLLM {self.version} has no attention backend {name}")
        return enum[name].get_class()


def load_vllm() -> VllmRuntime:
    """Import the vLLM modules the step calls (raises what the import raises)."""
    vllm = importlib.import_module("vllm")

    def module(name: str) -> Any:
        return importlib.import_module(name)

    return VllmRuntime(
        version=str(vllm.__version__),
        config=module("vllm.config"),
        registry=module("vllm.v1.attention.backends.registry"),
        backend_api=module("vllm.v1.attention.backend"),
        kv_cache_interface=module("vllm.v1.kv_cache_interface"),
        attention_layer=module("vllm.model_executor.layers.attention.attention"),
        mla_layer=module("vllm.model_executor.layers.attention.mla_attention"),
    )


def _int32(torch: Torch, values: list[int], device: Any) -> Tensor:
    return torch.tensor(values, dtype=torch.int32, device=device)


def _dataclass_kwargs(cls: Any, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` less the keys ``cls`` (a dataclass) has no field for (they differ by
    release: 0.33.0 dropped ``_seq_lens_cpu``)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {name: value for name, value in values.items() if name in names}


class VllmBackendStep:
    """One batch through vLLM's backend classes: the builder once, the impl per layer.

    Exposes what the runner asks of a step: ``slot_mapping``, ``token_order``,
    ``device_metadata()``, ``device_seq_lens()``, ``allocate_cache`` (one call per layer,
    in layer order), ``stage_new_tokens``, ``run`` and ``timed_launches``.
    """

    def __init__(self, torch: Torch, runtime: VllmRuntime, spec: ProviderSpec, plan: SmokePlan,
                 batch: BatchSpec, device: Any, layer_names: list[str]) -> None:
        self.torch, self.runtime, self.spec, self.plan = torch, runtime, spec, plan
        self.device = device
        self.backend = runtime.backend_class(plan.backend)
        if not hasattr(self.backend, "get_kv_cache_shape"):
            raise CannotRunHereError(
                f"vLLM {runtime.version}'s {self.backend.__name__} has no get_kv_cache_shape "
                "(the release's runner views one flat buffer per layer, "
                "vllm/v1/kv_cache_interface.py create_kv_cache_views): the smoke runs vLLM's "
                "backend classes of the releases whose backends state their KV cache shape")
        self.notes: list[str] = []
        if plan.engine != f"vllm=={runtime.version}":
            self.notes.append(f"the plan is negotiated for {plan.engine}; the backend classes "
                              f"that ran are vLLM {runtime.version}'s")
        self.vllm_config = self._vllm_config()
        self.kv_cache_spec = self._kv_cache_spec()
        self.smoke_layer_names = list(layer_names) or [f"{plan.name}.layer0"]
        self.layer_names = [f"model.layers.{index}.self_attn.attn"
                            for index in range(len(self.smoke_layer_names))]
        """vLLM's layer prefixes (a model's own form, as ``extract_layer_index`` reads them)."""
        with self.current_config():
            self.layers = [self._attention_layer(name) for name in self.layer_names]
            self.builder = self.backend.get_builder_cls()(
                self.kv_cache_spec, self.layer_names, self.vllm_config, device)
        threshold = getattr(self.builder, "reorder_batch_threshold", None)
        self.token_order: list[int] | None = None
        self.batch = batch
        if threshold is not None:
            permutation = decode_first_permutation(batch, threshold)
            if permutation != list(range(len(batch.requests))):
                starts = build_common_metadata(batch).query_start_loc
                self.token_order = [row for index in permutation
                                    for row in range(starts[index], starts[index + 1])]
                self.batch = batch.permuted(permutation)
        self.metadata: FlashAttentionMetadata = build_flash_attn_metadata(self.batch)
        self.common = self._common_metadata()
        self.slot_mapping = self.common.slot_mapping
        with self.current_config():
            self.attn_metadata = self.builder.build(0, self.common)
        self._layer_of: dict[int, Any] = {}
        self._new_tokens: dict[int, tuple[Tensor, Tensor]] = {}

    @property
    def writes_new_tokens(self) -> bool:
        """vLLM's cache update writes this step's K/V (an MLA decode through
        ``forward_mqa`` reads a cache the smoke wrote: the MLA layer, not the backend,
        writes it)."""
        return not self.plan.is_mla

    # -- vLLM's config and layers for the plan -------------------------------------------
    @contextlib.contextmanager
    def current_config(self) -> Iterator[None]:
        with self.runtime.config.set_current_vllm_config(self.vllm_config):
            yield

    def _vllm_config(self) -> Any:
        plan, config = self.plan, self.runtime.config
        kind = "mla" if plan.is_mla else "attention"
        if kind not in self.spec.stand_in_model:
            raise CannotRunHereError(f"{self.spec.id}: the contract has no stand-in model "
                                     f"for an {kind} plan")
        hf_config = resolve_arguments(plan, self.spec.stand_in_model[kind],
                                      f"{self.spec.id}.stand_in_model.{kind}")
        text = json.dumps(hf_config, sort_keys=True)
        folder = self.runtime.workdir / f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(text, encoding="utf-8")
        model_config = config.ModelConfig(model=str(folder), skip_tokenizer_init=True,
                                          dtype=plan.dtype)
        cache_config = config.CacheConfig(cache_dtype=plan.kv_cache_dtype)
        compilation = config.CompilationConfig(cudagraph_mode=plan.cudagraph_mode)
        return config.VllmConfig(model_config=model_config, cache_config=cache_config,
                                 compilation_config=compilation)

    def _kv_cache_spec(self) -> Any:
        plan, interface = self.plan, self.runtime.kv_cache_interface
        dtype = cache_dtype(self.torch, plan)
        if plan.is_mla:
            return interface.MLAAttentionSpec(**_dataclass_kwargs(interface.MLAAttentionSpec, {
                "block_size": plan.kernel_block_size, "num_kv_heads": 1,
                "head_size": plan.head_size, "dtype": dtype,
                "cache_dtype_str": plan.kv_cache_dtype}))
        return interface.FullAttentionSpec(**_dataclass_kwargs(interface.FullAttentionSpec, {
            "block_size": plan.kernel_block_size, "num_kv_heads": plan.num_kv_heads,
            "head_size": plan.head_size, "dtype": dtype,
            "sliding_window": plan.sliding_window}))

    def _mla_dims(self) -> dict[str, Any]:
        text = self.vllm_config.model_config.hf_text_config
        return {"q_lora_rank": getattr(text, "q_lora_rank", None),
                "qk_nope_head_dim": int(text.qk_nope_head_dim),
                "v_head_dim": int(text.v_head_dim)}

    def _attention_layer(self, name: str) -> Any:
        """vLLM's attention layer for ``name`` with the plan's backend pinned; it registers
        itself in the config's ``static_forward_context`` and builds the impl."""
        plan, cache_config = self.plan, self.vllm_config.cache_config
        if plan.is_mla:
            dims = self._mla_dims()
            layer = self.runtime.mla_layer.MLAAttention(
                num_heads=plan.num_q_heads, scale=plan.scale,
                qk_nope_head_dim=dims["qk_nope_head_dim"],
                qk_rope_head_dim=plan.qk_rope_head_dim, v_head_dim=dims["v_head_dim"],
                q_lora_rank=dims["q_lora_rank"], kv_lora_rank=plan.kv_lora_rank,
                kv_b_proj=None, cache_config=cache_config, prefix=name,
                attn_backend=self.backend)
        else:
            extra: dict[str, Any] = {}
            if plan.has_sinks:
                extra["sinks"] = self.torch.zeros(plan.num_q_heads, device=self.device,
                                                  dtype=torch_dtype(self.torch, plan.dtype))
            layer = self.runtime.attention_layer.Attention(
                num_heads=plan.num_q_heads, head_size=plan.head_size, scale=plan.scale,
                num_kv_heads=plan.num_kv_heads, cache_config=cache_config,
                logits_soft_cap=plan.logits_soft_cap,
                per_layer_sliding_window=plan.sliding_window, prefix=name,
                attn_backend=self.backend, **extra)
        layer.to(self.device)
        for part, value in (("q", plan.q_scale), ("k", plan.k_scale), ("v", plan.v_scale)):
            getattr(layer, f"_{part}_scale").fill_(value)
            setattr(layer, f"_{part}_scale_float", float(value))
        return layer

    # -- the runner's common metadata ----------------------------------------------------
    def _common_metadata(self) -> Any:
        torch, device, common = self.torch, self.device, build_common_metadata(self.batch)
        width = max(len(row) for row in common.block_table)
        table = [row + [0] * (width - len(row)) for row in common.block_table]
        seq_lens_cpu = torch.tensor(common.seq_lens, dtype=torch.int32)
        starts_cpu = torch.tensor(common.query_start_loc, dtype=torch.int32)
        computed = torch.tensor(common.context_lens, dtype=torch.int32)
        values = {
            "query_start_loc": starts_cpu.to(device), "query_start_loc_cpu": starts_cpu,
            "seq_lens": seq_lens_cpu.to(device), "num_reqs": common.num_reqs,
            "num_actual_tokens": common.num_actual_tokens,
            "max_query_len": common.max_query_len, "max_seq_len": common.max_seq_len,
            "block_table_tensor": _int32(torch, [v for row in table for v in row],
                                         device).reshape(len(table), width),
            "slot_mapping": torch.tensor(common.slot_mapping, dtype=torch.long, device=device),
            "causal": True, "seq_lens_cpu_upper_bound": seq_lens_cpu,
            "_seq_lens_cpu": seq_lens_cpu, "_num_computed_tokens_cpu": computed,
            "is_prefilling": torch.tensor(
                [r.query_len > 1 for r in self.batch.requests], device=device),
        }
        cls = self.runtime.backend_api.CommonAttentionMetadata
        return cls(**_dataclass_kwargs(cls, values))

    # -- the KV cache --------------------------------------------------------------------
    def kv_cache_shape(self, num_pages: int) -> tuple[int, ...]:
        plan = self.plan
        heads = 1 if plan.is_mla else plan.num_kv_heads
        with self.current_config():
            return tuple(self.backend.get_kv_cache_shape(
                num_pages, plan.kernel_block_size, heads, plan.head_size,
                cache_dtype_str=plan.kv_cache_dtype))

    def _stride_order(self, rank: int) -> tuple[int, ...]:
        """The backend's stride order, as the runner reads it (gpu_model_runner.py)."""
        try:
            with self.current_config():
                order = tuple(self.backend.get_kv_cache_stride_order())
        except (AttributeError, NotImplementedError):
            return tuple(range(rank))
        return order if len(order) == rank else tuple(range(rank))

    def allocate_cache(self, num_pages: int, generator: Any) -> PagedKvCache:
        """The next layer's cache as vLLM's runner allocates it, filled with finite noise."""
        torch, plan = self.torch, self.plan
        if len(self._layer_of) >= len(self.layers):
            raise ValueError(f"the step has {len(self.layers)} layers; a cache for each")
        num_pages = max(num_pages, 3)  # the pages axis stays distinct from a K/V axis of 2
        shape = self.kv_cache_shape(num_pages)
        order = self._stride_order(len(shape))
        physical = torch.randn([shape[i] for i in order], generator=generator,
                               device=self.device, dtype=torch.float32).to(
                                   cache_dtype(torch, plan))
        kv_cache = physical.permute(*[order.index(i) for i in range(len(order))])
        self._layer_of[id(kv_cache)] = self.layers[len(self._layer_of)]
        block = plan.kernel_block_size
        if plan.is_mla:
            if shape != (num_pages, block, plan.head_size):
                raise CannotRunHereError(f"{plan.backend}: vLLM's MLA cache shape {shape} is "
                                         "not (pages, block, head) as the smoke writes it")
            latent = kv_cache.unsqueeze(2)
            assert plan.kv_lora_rank is not None
            return PagedKvCache(plan.backend, "NHD", block, kv_cache, latent,
                                latent[..., :plan.kv_lora_rank], plan.k_scale, plan.k_scale)
        axis = 0 if shape[0] == 2 else 1
        key, value = kv_cache.select(axis, 0), kv_cache.select(axis, 1)
        expected = (num_pages, block, plan.num_kv_heads, plan.head_size)
        if tuple(key.shape) != expected:
            raise CannotRunHereError(f"{plan.backend}: vLLM's KV cache shape {shape} does not "
                                     f"hold (pages, block, kv heads, head) = {expected} per K/V")
        layout = "HND" if key.stride(2) > key.stride(1) else "NHD"
        return PagedKvCache(plan.backend, layout, block, kv_cache, key, value,
                            plan.k_scale, plan.v_scale)

    # -- per layer -----------------------------------------------------------------------
    def stage_new_tokens(self, cache: PagedKvCache, keys: Tensor, values: Tensor) -> None:
        """This step's new K/V rows (scheduler order) for ``cache``'s layer; the step hands
        them to vLLM's cache update before each forward."""
        if self.token_order is not None:
            order = self.torch.tensor(self.token_order, device=keys.device,
                                      dtype=self.torch.long)
            keys, values = keys[order], values[order]
        self._new_tokens[id(cache.storage)] = (keys.contiguous(), values.contiguous())

    def _layer(self, cache: PagedKvCache, sinks: Tensor | None) -> Any:
        layer = self._layer_of.get(id(cache.storage))
        if layer is None:
            raise ValueError("the cache was not allocated by this step")
        if sinks is not None:
            impl_sinks = getattr(layer.impl, "sinks", None)
            if impl_sinks is None:
                raise CannotRunHereError(f"{self.backend.__name__}'s impl holds no sinks")
            impl_sinks.copy_(sinks)  # the checkpoint's sinks, loaded into the layer's
        return layer

    def run(self, queries: Tensor, cache: PagedKvCache, sinks: Tensor | None = None
            ) -> Tensor:
        """Attention output for ``queries`` (scheduler order) in scheduler order."""
        torch = self.torch
        if self.token_order is not None:
            order = torch.tensor(self.token_order, device=queries.device, dtype=torch.long)
            queries = queries[order].contiguous()
        layer = self._layer(cache, sinks)
        with self.current_config():
            if self.plan.is_mla:
                output, _ = layer.impl.forward_mqa(queries, cache.storage, self.attn_metadata,
                                                   layer)
            else:
                output = self._forward(layer, queries, cache)
        if self.token_order is not None:
            inverse = torch.argsort(torch.tensor(self.token_order, device=output.device))
            output = output[inverse]
        return output

    def _forward(self, layer: Any, queries: Tensor, cache: PagedKvCache) -> Tensor:
        """What ``Attention.forward`` does around the impl (attention.py): the cache update
        unless the backend's forward writes the cache, the query quantized by the layer's
        ``query_quant``, the output in the model dtype."""
        torch = self.torch
        staged = self._new_tokens.get(id(cache.storage))
        if staged is None:
            raise ValueError("the step's new tokens were not staged for this layer")
        keys, values = staged
        if not self.backend.forward_includes_kv_cache_update:
            layer.impl.do_kv_cache_update(layer, keys, values, cache.storage,
                                          self.common.slot_mapping)
        query = queries
        if getattr(layer, "query_quant", None) is not None:
            query, _ = layer.query_quant(queries.reshape(queries.shape[0], -1), layer._q_scale)
            query = query.reshape(queries.shape)
        output = torch.empty(queries.shape[0], self.plan.num_q_heads, self.plan.head_size,
                             dtype=torch_dtype(torch, self.plan.dtype), device=queries.device)
        result = layer.impl.forward(layer, query, keys, values, cache.storage,
                                    self.attn_metadata, output=output)
        return output if result is None else result

    # -- what the runner checks ----------------------------------------------------------
    def device_metadata(self) -> FlashAttentionMetadata:
        """The metadata rebuilt from the tensors handed to vLLM's builder."""
        common = self.common
        table = common.block_table_tensor.tolist()
        meta = self.metadata
        return dataclasses.replace(
            meta, cu_seqlens_q=common.query_start_loc.tolist(),
            seqused_k=common.seq_lens.tolist(), block_table=table,
            common=dataclasses.replace(meta.common, block_table=table,
                                       slot_mapping=common.slot_mapping.tolist()))

    def device_seq_lens(self) -> list[int]:
        return [int(value) for value in self.common.seq_lens.tolist()]

    def timed_launches(self, queries: Tensor, cache: PagedKvCache,
                       sinks: Tensor | None = None) -> list[TimedLaunch]:
        return [TimedLaunch(f"{self.backend.__name__} forward, whole batch",
                            lambda: self.run(queries, cache, sinks), self.batch,
                            "decode" if self.plan.is_mla else "attention")]
