"""vLLM's start-up memory budget on one GPU: what ``determine_available_memory`` leaves
for the KV cache (``schemas/engines/<engine>/startup.yaml``, ``memory:``).

    requested = ceil(total x gpu_memory_utilization)
    available KV = requested - weights - activation peak - non-torch - CUDA graphs

or ``--kv-cache-memory-bytes`` as given. Weights come from the config's shapes and
quantization; the activation peak, non-torch memory and CUDA-graph memory are what vLLM
measures on the GPU, so they are estimates here (fitted to public start-up logs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from selector.memory.profile import MlaProfileWorkspace, StartupProfile
from selector.memory.weights import WeightEstimate, config_int, text_config
from selector.schema.defaults import EngineDefaults

__all__ = ["BudgetInputs", "MemoryBudget", "MemoryLine", "memory_budget", "offloaded_weight_bytes"]

GIB = 1024**3

Basis = Literal["vllm", "estimate", "input"]


class MemoryLine(BaseModel):
    """One term of the budget and how it is known."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    bytes: int
    basis: Basis
    """``vllm``: vLLM's own formula; ``estimate``: what vLLM measures, estimated here;
    ``input``: given by the user."""
    detail: str = ""


class BudgetInputs(BaseModel):
    """What the budget is computed from (shown in reports)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    device: str
    total_memory_bytes: int
    total_memory_source: str
    gpu_memory_utilization: float
    utilization_default: bool
    tensor_parallel_size: int
    max_num_batched_tokens: int
    max_num_seqs: int
    cudagraphs: bool
    kv_cache_memory_bytes: int | None = None
    reserved_bytes: int | None = None
    cpu_offload_bytes: int = 0
    """``--cpu-offload-gb`` in bytes: decoder-layer weights vLLM keeps in CPU memory."""


class MemoryBudget(BaseModel):
    """Where one GPU's memory goes before the KV cache, and what is left for it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: str
    inputs: BudgetInputs
    requested_bytes: int
    lines: tuple[MemoryLine, ...]
    weights: WeightEstimate
    available_kv_bytes: int
    model_runner: str | None = None
    """The GPU model runner vLLM starts (``V1``, ``V2``; None: not recorded for the release)."""
    cudagraph_capture_bytes: int | None = None
    """The CUDA-graph capture after the KV cache is sized, where it is not what the budget
    subtracts (None: the budget's CUDA-graph line is the estimate of it)."""

    @property
    def estimated(self) -> bool:
        return any(line.basis == "estimate" for line in self.lines)


def _mla_workspace_tokens(spec: MlaProfileWorkspace, max_model_len: int | None, seqs: int,
                          block_size: int | None) -> int:
    """vLLM's ``determine_chunked_prefill_workspace_size``; without a block size (vLLM
    picks it from the backend) only the length term and the cap answer."""
    blocks = seqs * block_size if block_size else 0
    length = spec.max_model_len_multiple * max_model_len if max_model_len else spec.cap_tokens
    return max(min(max(length, spec.seqs_blocks_multiple * blocks), spec.cap_tokens), blocks)


def _activation_bytes(raw: Mapping[str, Any], profile: StartupProfile, weights: WeightEstimate,
                      tokens: int, seqs: int, dtype_bytes: int, include_sampler: bool, *,
                      max_model_len: int | None = None,
                      block_size: int | None = None) -> tuple[int, str]:
    """The profile run's peak: the larger of one forward pass of ``tokens`` tokens and the
    dummy sampler run over ``seqs`` rows of full-vocabulary float32 logits (their
    transients do not overlap; vLLM gathers the logits, so the vocabulary is not split).

    The forward pass peaks in a decoder layer's MLP (``activation_hidden_factor``
    hidden-width tensors, ``activation_intermediate_factor`` MLP-width ones), and, where
    the profile states them, in an MoE layer (the persistent fused-MoE workspace plus the
    shared experts' MLP) or in an MLA layer's attention (the workspace, the layer's
    projections and the profile run's stand-in for the up-projected prefill context)."""
    est = profile.memory.estimates
    cfg = text_config(raw)
    tp = weights.tensor_parallel_size
    hidden = config_int(cfg, "hidden_size")
    experts = config_int(cfg, "num_local_experts", "n_routed_experts", "num_experts")
    inter = config_int(cfg, "intermediate_size_mlp", "intermediate_size", default=4 * hidden)
    model_type = str(cfg.get("model_type", ""))
    extra = sum(row.hidden_tensors for row in est.activation_extra_hidden
                if model_type in row.model_types)
    hidden_factor = est.activation_hidden_factor + extra

    def layer(width: float) -> float:
        return tokens * dtype_bytes * (hidden_factor * hidden
                                       + est.activation_intermediate_factor * width / tp)

    workspace = 0.0
    parts: list[str] = []
    if experts:
        topk = config_int(cfg, "num_experts_per_tok", default=1)
        expert_inter = config_int(cfg, "moe_intermediate_size",
                                  default=config_int(cfg, "intermediate_size"))
        dense = inter if config_int(cfg, "first_k_dense_replace") else 0
        if est.moe_workspace is not None and weights.quantization is None:
            n = 2 * expert_inter // tp
            workspace = tokens * topk * (max(n // 2, hidden) + max(n, hidden)) * dtype_bytes
            shared = (config_int(cfg, "n_shared_experts") * expert_inter
                      or config_int(cfg, "shared_expert_intermediate_size"))
            forward = max(layer(dense) if dense else 0.0, workspace + layer(shared))
            parts.append(f"fused-MoE workspace {tokens} x top-{topk} x "
                         f"({max(n // 2, hidden)} + {max(n, hidden)})")
            inter = dense or shared
        else:
            rows = [row for row in profile.memory.mxfp4_backends
                    if row.backend == weights.moe_backend and row.profile_tensors is not None]
            if rows and rows[0].profile_tensors is not None:
                kept = rows[0].profile_tensors
                padded = -(-expert_inter // rows[0].intermediate_multiple) \
                    * rows[0].intermediate_multiple // tp
                moe = tokens * dtype_bytes * (kept.hidden_tensors * hidden + topk * (
                    kept.routed_intermediate * padded + kept.routed_hidden * hidden))
                forward = max(layer(dense) if dense else 0.0, moe)
                parts.append(f"{weights.moe_backend} MoE: {tokens} x top-{topk} x "
                             f"({padded} + {hidden})")
            else:
                inter = max(dense, topk * expert_inter)
                forward = layer(inter)
    else:
        forward = layer(inter)
    kv_lora = config_int(cfg, "kv_lora_rank")
    part = est.attention_part
    if part is not None and not kv_lora:
        heads = config_int(cfg, "num_attention_heads")
        head_dim = config_int(cfg, "head_dim", default=hidden // max(heads, 1))
        q_width = heads * head_dim // tp
        kv_width = max(config_int(cfg, "num_key_value_heads", default=heads) // tp, 1) * head_dim
        copies = part.qk_norm_copies
        normed = q_width + kv_width if copies and model_type in copies.model_types else 0
        attention = workspace + tokens * dtype_bytes * (
            part.hidden_tensors * hidden + q_width + 2 * kv_width + normed
            + part.output_tensors * q_width)
        if attention > forward:
            forward = attention
            parts.append(f"attention sublayer (q {q_width}, kv {kv_width}"
                         + (", q/k norm copies" if normed else "") + ")")
    gdn = est.linear_attention_part
    if gdn is not None and model_type in gdn.model_types:
        key_width = config_int(cfg, "linear_num_key_heads") * config_int(cfg, "linear_key_head_dim")
        value_width = (config_int(cfg, "linear_num_value_heads")
                       * config_int(cfg, "linear_value_head_dim"))
        linear = workspace + tokens * dtype_bytes * (
            gdn.hidden_tensors * hidden + (gdn.key_width_tensors * key_width
                                           + gdn.value_width_tensors * value_width) / tp)
        if linear > forward:
            forward = linear
            parts.append(f"Gated DeltaNet layer (key {key_width}, value {value_width})")
    spec = est.mla_profile_workspace
    if kv_lora and spec is not None:
        heads = config_int(cfg, "num_attention_heads") // tp
        nope, rope = config_int(cfg, "qk_nope_head_dim"), config_int(cfg, "qk_rope_head_dim")
        v_dim = config_int(cfg, "v_head_dim")
        q_lora = config_int(cfg, "q_lora_rank")
        context = _mla_workspace_tokens(spec, max_model_len, seqs, block_size)
        stand_in = context * heads * (nope + v_dim) * dtype_bytes
        # the layer input and residual, the q (and its low-rank q_c), kv_a's output,
        # kv_c_normed and the attention output, all live when the stand-in is allocated
        live = 2 * hidden + heads * (nope + rope) + 2 * q_lora + kv_lora + rope + kv_lora \
            + heads * v_dim
        attention = workspace + stand_in + tokens * dtype_bytes * live
        if attention > forward:
            forward = attention
            parts.append(f"MLA profile stand-in {context} x {heads} heads x {nope + v_dim}")
    sampler = seqs * _vocab(cfg) * 4 * est.sampler_logit_copies if include_sampler else 0.0
    if sampler > forward:
        detail = (f"sampler profile: {seqs} seqs x vocab {_vocab(cfg)} float32 logits "
                  f"x {est.sampler_logit_copies:g} copies")
    else:
        detail = f"forward profile: {tokens} batched tokens x (hidden {hidden}, MLP {inter}/{tp})"
        if parts:
            detail += "; " + ", ".join(parts)
        if not include_sampler:
            detail += "; no sampler run (a pooling model's profile run pools)"
    return int(max(forward, sampler)), detail


def _vocab(cfg: Mapping[str, Any]) -> int:
    return config_int(cfg, "vocab_size", default=32000)


_NOT_OFFLOADED = ("embedding", "lm_head", "vision tower")
"""Only the decoder layers pass through vLLM's offloader (``make_layers``:
vllm/model_executor/models/utils.py:905-917 in 0.33.0)."""


def offloaded_weight_bytes(weights: WeightEstimate, cpu_offload_bytes: int) -> int:
    """The weight bytes ``--cpu-offload-gb`` moves to CPU memory: vLLM's UVA offloader
    moves whole decoder-layer parameters, in layer order, until the GiB asked for are
    reached (vllm/model_executor/offloader/uva.py:75-124), so at most the decoder layers'
    weights; the last parameter may take it a little past the figure asked for, which
    is not counted here."""
    if cpu_offload_bytes <= 0:
        return 0
    layers = sum(part.bytes for part in weights.parts
                 if part.name.removesuffix(" (not quantized)") not in _NOT_OFFLOADED)
    return min(cpu_offload_bytes, layers)


def memory_budget(raw: Mapping[str, Any], weights: WeightEstimate, profile: StartupProfile, *,
                  device: str, total_memory_bytes: int, total_memory_source: str,
                  gpu_memory_utilization: float, num_layers: int, dtype_bytes: int,
                  cudagraphs: bool, max_num_batched_tokens: int, max_num_seqs: int,
                  utilization_default: bool = False, kv_cache_memory_bytes: int | None = None,
                  reserved_bytes: int | None = None, include_sampler: bool = True,
                  cpu_offload_bytes: int = 0, max_model_len: int | None = None,
                  block_size: int | None = None, model_runner: str | None = None,
                  captured_graphs: int = 0,
                  encoder_profile: MemoryLine | None = None) -> MemoryBudget:
    """The budget of one GPU (``weights`` already per GPU). The batch limits and the
    memory fraction are the deployment's resolved values (its own, else the engine's
    ``defaults.yaml`` for the device: :func:`selector.inputs.config.resolve_target`), the ones the
    KV plan uses too; ``utilization_default``: the fraction is the engine's default.
    ``include_sampler`` is False for a pooling model, whose profile run runs its pooler
    instead of the dummy sampler (``if self.is_pooling_model: self._dummy_pooler_run``,
    vllm/v1/worker/gpu_model_runner.py:6354-6357 in 0.25.1, :6136-6139 in 0.33.0; Model
    Runner V2's ``profile_run``, vllm/v1/worker/gpu/model_runner.py:1041-1045 in 0.33.0),
    and to read logs of vLLM's old V0 engine, whose non-driver ranks ran no sampler.
    ``max_model_len`` and ``block_size`` (when given) size an MLA model's profile-run
    workspace. ``model_runner``: the runner vLLM starts
    (:meth:`~selector.memory.profile.ModelRunnerRule.runner`); ``captured_graphs``: the
    CUDA graphs it captures. ``encoder_profile``: what the profile run keeps of a
    multimodal encoder's dummy pass (``selector.memory.encoder``)."""
    mem = profile.memory
    est = mem.estimates
    tp = weights.tensor_parallel_size
    util = gpu_memory_utilization
    tokens, seqs = max_num_batched_tokens, max_num_seqs
    inputs = BudgetInputs(
        device=device, total_memory_bytes=total_memory_bytes,
        total_memory_source=total_memory_source, gpu_memory_utilization=util,
        utilization_default=utilization_default, tensor_parallel_size=tp,
        max_num_batched_tokens=tokens, max_num_seqs=seqs, cudagraphs=cudagraphs,
        kv_cache_memory_bytes=kv_cache_memory_bytes, reserved_bytes=reserved_bytes,
        cpu_offload_bytes=cpu_offload_bytes)
    requested = math.ceil(total_memory_bytes * util)
    lines: list[MemoryLine] = []
    if reserved_bytes:
        lines.append(MemoryLine(name="non-KV memory (reserved_memory_gib)", bytes=reserved_bytes,
                                basis="input"))
    else:
        detail = f"{weights.total_params / 1e9:.2f}B parameters"
        if weights.quantization:
            detail += f", {weights.quantization}"
        if weights.moe_backend:
            detail += f" ({weights.moe_backend} MoE padding)"
        if weights.unknown:
            detail += f"; not counted: {', '.join(weights.unknown)} (a lower bound)"
        if tp > 1:
            detail += f", 1/{tp} per GPU"
        draft = sum(part.bytes for part in weights.parts if part.name == "draft model")
        if draft:
            detail += f"; with the speculative draft's {draft / GIB:.2f} GiB"
        offloaded = offloaded_weight_bytes(weights, cpu_offload_bytes)
        if offloaded:
            detail += f", {offloaded / GIB:.2f} GiB of it in CPU memory (--cpu-offload-gb)"
        lines.append(MemoryLine(name="weights", bytes=weights.bytes_per_gpu - offloaded,
                                basis="estimate", detail=detail))
        activation, how = _activation_bytes(raw, profile, weights, tokens,
                                           EngineDefaults.profile_run_seqs(tokens, seqs),
                                           dtype_bytes, include_sampler,
                                           max_model_len=max_model_len, block_size=block_size)
        lines.append(MemoryLine(name="activation peak (profile run)", bytes=activation,
                                basis="estimate", detail=how))
        if encoder_profile is not None:
            lines.append(encoder_profile)
        non_torch = est.non_torch_gib + (est.non_torch_tp_gib if tp > 1 else 0.0)
        lines.append(MemoryLine(name="non-torch memory", bytes=int(non_torch * GIB),
                                basis="estimate",
                                detail="cuBLAS / NCCL workspaces" + (" (TP > 1)" if tp > 1 else "")))
        rule = mem.model_runner
        if cudagraphs and rule is not None and model_runner == "V2" \
                and not rule.v2_cudagraph_estimate:
            lines.append(MemoryLine(name="CUDA graphs", bytes=0, basis="vllm",
                                    detail="the V2 model runner estimates none before the KV "
                                           f"cache is sized ({rule.source})"))
        elif cudagraphs and mem.cudagraph_estimate_applied:
            graphs = est.cudagraph_base_gib + est.cudagraph_per_layer_gib * num_layers
            lines.append(MemoryLine(name="CUDA graphs", bytes=int(graphs * GIB), basis="estimate",
                                    detail=f"{num_layers} layers; subtracted since "
                                           "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1"))
    capture = est.cudagraph_capture
    capture_bytes = None
    if cudagraphs and capture is not None and captured_graphs:
        capture_bytes = int((capture.base_gib + capture.per_graph_gib * captured_graphs) * GIB)
    if kv_cache_memory_bytes is not None:
        available = kv_cache_memory_bytes
    else:
        available = requested - sum(line.bytes for line in lines)
    return MemoryBudget(engine=profile.engine, inputs=inputs, requested_bytes=requested,
                        lines=tuple(lines), weights=weights, available_kv_bytes=available,
                        model_runner=model_runner, cudagraph_capture_bytes=capture_bytes)
