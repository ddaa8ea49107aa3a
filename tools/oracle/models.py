"""Start vLLM so that it can build model classes on the CPU (no GPU, no weights).

``start_models()`` is ``oracle.start`` (the instrument's CUDA emulation at capability 9.0)
plus the CPU-only necessities of building a model class under ``torch.device("meta")``;
every model-building recorder (tools/vllm_model_reference.py, weights_oracle.py,
pp_oracle.py, quant_oracle.py, max_len_oracle.py, encoder_oracle.py) starts with it:

* ``torch.ops._C`` (and the other extension namespaces, ``_flashkda_C`` among them: Kimi-K3's
  KDA layer sizes its FlashKDA workspace with ``get_workspace_size`` while built) answer
  capability queries whose names contain ``support`` with ``False`` during import, and,
  after import, any missing
  op with an inert stub (model constructors keep references to kernels such as
  ``silu_and_mul`` but never call them here), but ``get_cuda_view_from_cpu_tensor``, whose
  result a constructor reads (Qwen4Exp's PLE layer), answers a meta tensor of the host
  tensor's shape;
* ``triton.Config`` (when vLLM's Triton placeholder is in use) keeps its arguments,
  because kernel modules filter their autotune configs on import,
  ``triton.set_allocator`` is inert (OLMo-Hybrid's GDN layer calls it while built) and
  ``triton.language.extra`` is an inert namespace (Step5's kernel modules bind
  ``tl.extra.cuda.libdevice`` at import) and ``triton.next_power_of_2`` is Triton's host
  function (Qwen4Exp's PLE layer sizes a kernel block with it while built, 0.30.0-0.32.0);
* under the meta-device build a factory's ``pin_memory=True`` is dropped (no pinned
  allocator without a GPU) and ``torch.cuda.get_device_properties`` answers the emulated
  capability as ``major`` / ``minor`` (Step5's sparse adapter asks for it while built);
* ``torchvision._meta_registrations`` is an empty module (torchvision's compiled ops
  cannot load against a CPU torch; multimodal model modules only need its transforms);
* ``ORACLE_EXTRA_PATH`` adds folders of pure-Python packages some model modules import
  and the oracle venv lacks (``compressed-tensors``, ``loguru``, ``torchvision``,
  installed there with ``pip install --no-deps --target``);
* ``sparse_attn_indexer.has_deep_gemm`` answers True (the DeepSeek-V3.2 indexer refuses
  to be built without the DeepGEMM library, which a GPU deployment has; it changes no
  cache shape);
* FlashInfer's ``get_device_sm_count`` (which 0.33.0's ``FlashInferImpl`` calls while the
  layer is built, to size a scratch buffer) answers an H200's 132 SMs;
* ``current_platform.log_warnings`` is silent (it asks NVML about the GPUs);
* ``registry._run_in_subprocess`` runs in this process (the subprocess would lack these
  patches), and ``registry._try_inspect_model_cls`` lets an error while importing a model
  module through (vLLM logs it and refuses the architecture as "failed to be inspected":
  for a package the venv lacks that is the harness failing, not vLLM refusing);
  ``ORACLE_EXTRA_PATH`` then also needs ``mistral_common`` (Pixtral, Llava, Mistral-3,
  Voxtral) and ``timm`` (Gemma-3n, OpenVLA);
* ``torch.cuda.Stream``/``Event`` are inert, and tensors a constructor puts on the GPU
  explicitly (a factory's ``device=``, ``nn.Module.to(device)``) go to ``meta``
  (``device_tensors_on_meta``); torch's ``_device_constructors`` cache is filled before
  those wrappers are installed, so ``torch.device("meta")`` still routes every parameter
  to ``meta`` (no weight memory);
* kernel modules only a JIT warm-up imports at construction time are inert
  (``INERT_MODULES``), and so are optional packages the venv lacks that an import on the
  way to the KV-cache planning touches (``_OPTIONAL_MODULES``: llguidance and xgrammar for
  0.25.1's structured-output classes) and the CuTe DSL kernel modules of vLLM's model
  packages when the CUTLASS DSL is absent (``_CUTE_DSL_KERNELS``: 0.30.0's DeepSeek-V4);
* vLLM's general plugins are not loaded (``VLLM_PLUGINS`` empty unless set, which names the
  plugins vLLM loads: vllm/plugins/__init__.py): an installed package's
  ``vllm.general_plugins`` entry point may re-register an architecture with its own class
  (terratorch's ``TerratorchFix`` over vLLM's ``Terratorch``), and the answers are vLLM's
  classes;
* config switches that make a constructor download pretrained weights from the Hub
  (``WEIGHT_DOWNLOADS``: a Terratorch model's ``backbone_pretrained``) are turned off by
  ``without_weight_downloads`` (offline; weights decide no cache spec and no shape);
* remote config classes (``STAND_IN_MODEL_TYPES``) are replaced by a stand-in that keeps
  every key (``register_remote_configs``);
* a one-process gloo "distributed" group of world size 1 (port 29533, or
  ``ORACLE_DIST_PORT`` when several oracles run at once).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import types
from collections.abc import Iterable
from typing import Any

from .locate import extra_paths
from .start import start

__all__ = ["INERT_MODULES", "MODEL_CAPABILITY", "STAND_IN_MODEL_TYPES", "WEIGHT_DOWNLOADS",
           "device_tensors_on_meta", "engram_tokenizer", "flashmla_mega_build", "gpu_model_runner",
           "on_gpu",
           "register_remote_configs", "start_models", "without_weight_downloads"]

MODEL_CAPABILITY = (9, 0)
"""The capability models are built at (the layer layout does not depend on it)."""

_STATE: dict[str, Any] = {"permissive": False, "started": False, "stand_ins": frozenset()}
"""``permissive``: after vLLM's import-time capability queries, any missing op is an inert
stub; ``started``: ``start_models`` ran; ``stand_ins``: its extra stand-in model types."""


class _InertOp:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, item: str) -> _InertOp:
        if item == "__isabstractmethod__":  # an ABC's kernel attribute (mHC's JIT warm-up)
            raise AttributeError(item)
        return _InertOp(f"{self._name}.{item}")

    def __call__(self, *args: Any, **kwargs: Any) -> bool:
        return False


def _device_view(cpu_tensor: Any) -> Any:
    """``torch.ops._C.get_cuda_view_from_cpu_tensor``: the GPU's view of a host tensor (UVA),
    here a meta tensor of its shape and dtype like every other GPU tensor of the build
    (Qwen4Exp's PLE n-gram embedding asks for its device while built, 0.30.0-0.31.0)."""
    import torch

    return torch.empty(cpu_tensor.shape, dtype=cpu_tensor.dtype, device="meta")


_STAND_IN_OPS: dict[str, Any] = {"get_cuda_view_from_cpu_tensor": _device_view}
"""Missing ops a model constructor uses the result of, answered as on the GPU."""


class _OpNamespace:
    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, item: str) -> Any:
        try:
            return getattr(self._real, item)
        except AttributeError:
            if item in _STAND_IN_OPS:
                return _STAND_IN_OPS[item]
            if _STATE["permissive"] or "support" in item:
                return _InertOp(item)
            raise


class _NoStream:
    """``torch.cuda.Stream`` / ``Event`` on a CPU: MoE layers create an
    auxiliary stream in their constructor and never use it here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, item: str) -> Any:
        return lambda *args, **kwargs: None


class _TritonConfig:
    """Stands in for ``triton.Config`` when Triton cannot load (no GPU): kernel
    modules inspect their autotune configs at import time."""

    def __init__(self, kwargs: dict[str, Any], num_warps: int = 4, num_stages: int = 2,
                 **extra: Any) -> None:
        self.kwargs = kwargs
        self.num_warps = num_warps
        self.num_stages = num_stages


_FACTORIES = ("empty", "zeros", "ones", "full", "arange", "tensor", "empty_strided",
              "randn", "rand", "randint", "zeros_like", "empty_like", "ones_like")


def on_gpu(device: Any) -> bool:
    if isinstance(device, int) and not isinstance(device, bool):
        return True
    return str(device).startswith("cuda")


@contextlib.contextmanager
def device_tensors_on_meta() -> Any:
    """During model construction: tensors a constructor places on the GPU
    explicitly (``device=current_platform.current_device()``, a CUDA index) are
    created on ``meta`` like every other parameter, and the current device is 0."""
    import torch
    import torch.utils._device as device_mode

    # ``torch.device("meta")`` routes the constructors it cached on first use; filled
    # here, that cache holds torch's own functions (which the wrappers call), not the
    # wrappers, so every parameter still lands on ``meta``.
    device_mode._device_constructors()
    saved = {name: getattr(torch, name) for name in _FACTORIES}
    saved_current = torch.cuda.current_device
    saved_index = torch.accelerator.current_device_index
    saved_properties = torch.cuda.get_device_properties
    saved_to = torch.nn.Module.to

    def wrap(fn: Any) -> Any:
        def inner(*args: Any, **kwargs: Any) -> Any:
            if on_gpu(kwargs.get("device")):
                kwargs["device"] = "meta"
            if kwargs.get("pin_memory"):  # a host staging buffer (Step5's sparse adapter):
                kwargs["pin_memory"] = False  # no pinned allocator without a GPU
            return fn(*args, **kwargs)

        return inner

    def module_to(self: Any, *args: Any, **kwargs: Any) -> Any:
        # a tower moved to the GPU explicitly (Kimi-K2.5's vision tower) stays on meta
        if on_gpu(kwargs.get("device")):
            kwargs["device"] = "meta"
        if args and not isinstance(args[0], torch.dtype | torch.Tensor) and on_gpu(args[0]):
            args = ("meta", *args[1:])
        return saved_to(self, *args, **kwargs)

    try:
        for name, fn in saved.items():
            setattr(torch, name, wrap(fn))
        torch.cuda.current_device = lambda: 0
        # DeepSeek-V4.1's Engram embedding asks the accelerator's index for its SM count
        torch.accelerator.current_device_index = lambda: 0
        # ... and the device's properties (its multi_processor_count sizes kernel launches,
        # never a cache): an H200's 132 SMs; major / minor the emulated capability (Step5's
        # FlashInfer sparse adapter reads torch.cuda.get_device_capability while built)
        from vllm.platforms import current_platform

        cap = current_platform.get_device_capability()
        major, minor = (cap.major, cap.minor) if cap is not None else (9, 0)
        torch.cuda.get_device_properties = lambda *a, **k: types.SimpleNamespace(
            multi_processor_count=132, name="NVIDIA H200", major=major, minor=minor)
        torch.nn.Module.to = module_to  # type: ignore[method-assign]
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch, name, fn)
        torch.cuda.current_device = saved_current
        torch.accelerator.current_device_index = saved_index
        torch.cuda.get_device_properties = saved_properties
        torch.nn.Module.to = saved_to  # type: ignore[method-assign]


class _AttrDict(dict):  # type: ignore[type-arg]
    """A JSON-serialisable dict whose keys also read as attributes."""

    def __getattr__(self, item: str) -> Any:
        try:
            return self[item]
        except KeyError:
            raise AttributeError(item) from None


def _attr(value: Any) -> Any:
    if isinstance(value, dict):
        return _AttrDict({k: _attr(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_attr(v) for v in value]
    return value


_FORCED_STAND_INS = frozenset({"molmo2"})
"""Remote config classes stood in over transformers' own class of the model type, where vLLM
reads the remote class's names: allenai's Molmo2Config keeps ``vit_config`` /
``adapter_config`` (vllm/model_executor/models/molmo2.py:2375-2382), which transformers
5.24.0's Molmo2Config moves to ``vision_config`` (configuration_molmo2.py:213-216)."""

_STAND_IN_CLASS_NAMES = {"new": "NewConfig"}
"""The remote class's name where vLLM checks it (``GteNewModelConfig`` asserts
``NewConfig``, vllm/model_executor/models/config.py:570: Alibaba-NLP's new-impl)."""

_SUB_CONFIG_KEYS = ("llm_config", "text_config", "vision_config", "projector_config", "encoder",
                    "decoder", "audio_config", "vit_config", "adapter_config")
"""The sub-configs of a remote config class that its ``__init__`` turns into config
objects (InternVL's ``InternVLChatConfig``: ``llm_config`` by its model type,
``vision_config`` an ``InternVisionConfig``; Kanana-V's ``text_config`` /
``vision_config`` / ``projector_config``; Nemotron-Parse's ``decoder``, a NemotronParseTextConfig
(``_REMOTE_SUB_CONFIGS``) or the synthetic configs' MBart config, and its RADIO ``encoder``,
whose keys stay attributes; MiniCPM-o's ``audio_config``, a WhisperConfig; Ovis2.5's
``vit_config``, its remote SigLIP2-NaViT config, whose keys stay attributes)."""


_SUB_CONFIG_TYPES = {("interns1", "vision_config"): "internvl_vision",
                     ("molmo2", "text_config"): "molmo2_remote_text",
                     ("minicpmv", "vision_config"): "siglip_vision_model",
                     ("minicpmo", "vision_config"): "siglip_vision_model",
                     ("minicpmo", "audio_config"): "whisper"}
"""(model type, sub-config): the class the remote config builds whatever the sub-config's own
``model_type`` says (openbmb's MiniCPMVConfig / MiniCPMOConfig: ``SiglipVisionConfig(**
vision_config)``, ``WhisperConfig(**audio_config)``; MiniCPM-V 2.6's config.json names its
vision_config ``siglip``; Intern-S1's InternS1Config: ``InternS1VisionConfig(**vision_config)``, a
subclass of transformers' InternVLVisionConfig)."""


_REMOTE_SUB_CONFIGS: dict[str, dict[str, str]] = {
    # NVIDIA-Nemotron-Parse-v1.1's hf_nemotron_parse_config.py, NemotronParseTextConfig.__init__
    # (the mBART decoder): self.hidden_size = self.d_model, self.num_attention_heads =
    # self.encoder_attention_heads
    "nemotron_parse_text": {"hidden_size": "d_model", "num_attention_heads": "encoder_attention_heads"},
    # allenai's Molmo2TextConfig (the remote class, not transformers' molmo2_text): its keys
    "molmo2_remote_text": {},
}
"""Remote sub-config classes (no class in transformers) by model type: a config object of
the section's keys plus the attributes the remote ``__init__`` derives from others
({attribute: the key it copies})."""

_REMOTE_DEFAULTS: dict[str, dict[str, Any]] = {
    # microsoft/Phi-4-multimodal-instruct's config.json has no img_processor key: the remote
    # Phi4MMConfig's default (None) is what vLLM reads, as SigLIP
    # (vllm/model_executor/models/phi4mm.py:137-142, 737-739)
    "phi4mm": {"img_processor": None},
}
"""{model type: {attribute: the remote config class's default}} for keys a checkpoint's
config.json leaves to that default and vLLM's model class reads."""

_PARENT_KEYS: dict[str, dict[str, tuple[str, ...]]] = {
    # NemotronParseConfig.__init__: decoder["max_sequence_length"] = max_sequence_length
    "nemotron_parse": {"decoder": ("max_sequence_length",)},
}
"""{model type: {sub-config: the parent's keys its remote ``__init__`` copies into it}}."""


def _sub_config(value: dict[str, Any], model_type: str | None = None) -> Any:
    """A sub-config as the remote class builds it: transformers' class of ``model_type``
    (default: its own ``model_type``), a remote sub-config class's keys and derived
    attributes (``_REMOTE_SUB_CONFIGS``), else its keys as attributes."""
    from transformers import PretrainedConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    model_type = model_type or value.get("model_type")
    if isinstance(model_type, str) and model_type in CONFIG_MAPPING:
        fields = {k: v for k, v in value.items() if k != "model_type"}
        return CONFIG_MAPPING[model_type](**fields)
    if isinstance(model_type, str) and model_type in _REMOTE_SUB_CONFIGS:
        config = PretrainedConfig()
        derived = {name: value[key] for name, key in _REMOTE_SUB_CONFIGS[model_type].items()
                   if key in value}
        for key, item in {**value, **derived}.items():
            config.__dict__[key] = item
        return config
    return _attr(value)


_VERSIONED_BASES: dict[str, dict[str, str]] = {
    "minicpmv": {"2.5": "llama", "2.6": "qwen2", "4.0": "llama", "4.5": "qwen3"},
    "minicpmo": {"2.6": "qwen2", "4.5": "qwen3"},
}
"""Remote config classes whose base is the language model's config class, one per release of
the checkpoint: openbmb's MiniCPMVConfig / MiniCPMOConfig subclass LlamaConfig (MiniCPM-Llama3-
V-2.5, MiniCPM-V-4), Qwen2Config (MiniCPM-V-2.6, MiniCPM-o-2.6) or Qwen3Config (MiniCPM-V-4.5,
MiniCPM-o-4.5: ``class MiniCPMOConfig(Qwen3Config)``), as the keys their config.json files
hold show (``max_window_layers`` / ``use_sliding_window``: Qwen2Config's; ``mlp_bias`` /
``pretraining_tp``: LlamaConfig's). The base's ``__init__`` derives fields the model reads
(Qwen2Config drops ``sliding_window`` unless ``use_sliding_window``), so the stand-in is that
class; the version key is read as vLLM's dispatch reads it (``str(version)``, the first two
parts; absent: MiniCPM-V 2.5 unless the 2.0 shape, MiniCPM-o 2.6). A version not listed (2.0,
whose base is the remote MiniCPMConfig; one vLLM refuses) keeps the plain stand-in."""


def _versioned_base(model_type: str, kwargs: dict[str, Any]) -> str | None:
    version = kwargs.get("version")
    if version is None:
        if model_type == "minicpmo":
            return _VERSIONED_BASES[model_type]["2.6"]
        if kwargs.get("hidden_size") == 2304 and kwargs.get("query_num") == 64:
            return None  # MiniCPM-V 2.0
        return _VERSIONED_BASES[model_type]["2.5"]
    return _VERSIONED_BASES[model_type].get(".".join(str(version).split(".")[:2]))


def register_remote_configs() -> None:
    """DeciLM (Nemotron NAS) and MiniCPM3 ship their config class as
    remote code, which an offline harness cannot fetch. A stand-in config class
    keeps every key and gives ``block_configs`` the attribute access vLLM's
    ``nemotron_nas.py`` uses (``block_config.attention.n_heads_in_group``);
    every layer decision is still vLLM's. The config's ``auto_map`` is removed
    so transformers uses it."""
    from transformers import AutoConfig, PretrainedConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    for model_type in sorted(STAND_IN_MODEL_TYPES | _STATE["stand_ins"]):
        if model_type in CONFIG_MAPPING and model_type not in _FORCED_STAND_INS:
            continue  # transformers has the class itself: only auto_map is dropped

        class StandInConfig(PretrainedConfig):  # type: ignore[misc]
            """Only carries the config.json's values (every key an attribute, a sub-config
            as its own config class): vLLM's model class decides every layer."""

            def __init__(self, block_configs: list[Any] | None = None, **kwargs: Any) -> None:
                for key, value in {**_REMOTE_DEFAULTS.get(self.model_type, {}), **kwargs}.items():
                    self.__dict__[key] = value  # before the base class reads them
                super().__init__(**kwargs)
                copied = _PARENT_KEYS.get(self.model_type, {})
                for key, value in kwargs.items():
                    self.__dict__.setdefault(key, value)
                    if key in _SUB_CONFIG_KEYS and isinstance(value, dict):
                        parent = {k: kwargs[k] for k in copied.get(key, ()) if k in kwargs}
                        forced = _SUB_CONFIG_TYPES.get((self.model_type, key))
                        self.__dict__[key] = _sub_config({**value, **parent}, forced)
                if block_configs is not None:
                    self.block_configs = _attr(block_configs)

        StandInConfig.model_type = model_type
        StandInConfig.__name__ = _STAND_IN_CLASS_NAMES.get(model_type, f"StandInConfig_{model_type}")
        if model_type in _VERSIONED_BASES:
            _register_versioned(model_type, StandInConfig)
            continue
        AutoConfig.register(model_type, StandInConfig, exist_ok=model_type in _FORCED_STAND_INS)


def _register_versioned(model_type: str, plain: Any) -> None:
    """The stand-in of a remote class whose base is the version's language-model config class
    (``_VERSIONED_BASES``): ``cls(**config)`` builds a subclass of that base holding every key
    (sub-configs as their classes), or the plain stand-in for a version not listed."""
    from transformers import AutoConfig, PretrainedConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    made: dict[str, Any] = {}

    def subclass(base_type: str) -> Any:
        if base_type not in made:
            base = CONFIG_MAPPING[base_type]

            def __init__(self: Any, **kwargs: Any) -> None:
                base.__init__(self, **kwargs)
                for key, value in kwargs.items():
                    if key in _SUB_CONFIG_KEYS and isinstance(value, dict):
                        forced = _SUB_CONFIG_TYPES.get((model_type, key))
                        self.__dict__[key] = _sub_config(value, forced)

            made[base_type] = type(f"StandInConfig_{model_type}_{base_type}", (base,),
                                   {"model_type": model_type, "__init__": __init__})
        return made[base_type]

    class VersionedStandIn(PretrainedConfig):  # type: ignore[misc]
        """Builds the version's stand-in (see ``_VERSIONED_BASES``)."""

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            base_type = _versioned_base(model_type, kwargs)
            target = subclass(base_type) if base_type is not None else plain
            return target(*args, **kwargs)

    VersionedStandIn.model_type = model_type
    VersionedStandIn.__name__ = f"StandInConfig_{model_type}"
    AutoConfig.register(model_type, VersionedStandIn)


STAND_IN_MODEL_TYPES = frozenset({"nemotron-nas", "minicpm3", "qwen",
                                  # remote-code config classes of vLLM 0.33.0's text models
                                  # (tools/synthetic_model_configs.py RAW)
                                  "orion", "solar", "step1", "minicpm", "bailing_moe",
                                  "bailing_moe_v2", "param2moe", "pangu_embedded",
                                  "pangu_ultra_moe", "pangu_pro_moe_v2", "k2_horizon", "domyn_edge",
                                  "plamo3", "ouro", "molmo",
                                  # vLLM 0.25.1-0.26.0 (PLaMo-2)
                                  "plamo2",
                                  # and of the mapped architectures the reference builds
                                  "internvl_chat", "internlm2", "telechat", "teleflm", "new",
                                  "Keye", "phi3_v", "kanana-1.5-v", "dots_ocr", "nemotron_parse",
                                  "minicpmv", "minicpmo", "ernie4_5_moe_vl",
                                  # mapped since (the nbcfg answers)
                                  "phi4mm", "interns1", "moonshot_kimia", "phi4-siglip",
                                  "moss_audio", "llava_onevision2_moe", "molmo2",
                                  # mapped since (the nbproc answers)
                                  "ovis2_5", "NemotronH_Nano_VL_V2"})
"""Model types whose config class is remote code: DeciLM (Nemotron NAS),
MiniCPM3 (transformers has its class: only ``auto_map`` is dropped) and QWen
(v1, ``QWenLMHeadModel``: vLLM's answer is then its own, the architecture's refusal). The
stand-in keeps every key of the config.json as an attribute. MiMo is not
stood in: its remote class (a Qwen2Config) rewrites ``sliding_window``. InternVL
(``internvl_chat``, ``InternVLChatModel``): its ``llm_config`` becomes the config class of
its model type and its ``vision_config`` (InternViT) keeps its keys as attributes.
InternLM2 (``internlm2``), TeleChat2 (``telechat``) and TeleFLM (``teleflm``): their
config classes only hold the keys (vLLM's ``internlm2.py`` / ``telechat2.py`` /
``teleflm.py`` read them; TeleChat2's model maps ``n_layer`` etc. itself). GTE's
``new`` (Alibaba-NLP new-impl, ``NewConfig``): its keys, under the remote class's name.
Keye (``Keye``): a Qwen3 text config with a SigLIP ``vision_config``. Phi-3-Vision
(``phi3_v``): a Phi-3 text config with its ``img_processor`` / ``embd_layer`` dicts.
dots.ocr (``dots_ocr``): a Qwen2 text config whose ``vision_config`` dict vLLM's
``dots_ocr.py`` turns into its own ``DotsVisionConfig``. Nemotron-Parse (``nemotron_parse``,
v1.1 and 3.5): the ``decoder`` as a config object (the remote NemotronParseTextConfig's keys and
derived attributes, or an MBart config) and the RADIO ``encoder``'s keys. Phi-4-multimodal
(``phi4mm``): the top-level keys plus the remote Phi4MMConfig's ``img_processor`` default
(``_REMOTE_DEFAULTS``). Intern-S1 (``interns1``): its ``vision_config`` an InternVLVisionConfig
(``_SUB_CONFIG_TYPES``), its ``text_config`` the class of its model type. Kimi-Audio
(``moonshot_kimia``): the keys vLLM's ``kimi_audio.py`` hands to its Qwen2 language model.
Phi-4-reasoning-vision (``phi4-siglip``): a Phi-3 text config's keys with a SigLIP2
``vision_config``. MOSS-Audio (``moss_audio``): the keys, which vLLM's ``moss_audio.py`` wraps
in its own MossAudioConfig. LLaVA-OneVision-2 (``llava_onevision2_moe``): a text_config of its
model type's class and the vision_config's keys as attributes."""


class _InertModule(types.ModuleType):
    """A kernel module whose every attribute is an inert stub."""

    def __getattr__(self, item: str) -> Any:
        if item.startswith("__"):
            raise AttributeError(item)
        return _InertOp(item)


INERT_MODULES = ("vllm.model_executor.kernels.mhc.tilelang_kernels", "flashinfer.comm",
                 "vllm.third_party.deep_gemm")
"""Kernel modules that model construction imports but never calls here, and that cannot
load on a CPU: DeepSeek-V4's mHC TileLang kernels (only the JIT warm-up imports them,
``kernel_config.enable_jit_warmup``; TileLang has no CPU build), FlashInfer's
communication kernels (the all-reduce fusion pass imports them; they need libcudart:
the oracle venvs of releases that install FlashInfer) and vLLM's vendored DeepGEMM (its
compiled extension needs CUDA; Dots3Note's vision module imports ``per_block_cast_to_fp8``
from it, vllm/models/dots3_note/nvidia/vision.py:15, which a bf16 build never calls).
None decides a cache shape."""


def _next_power_of_2(n: int) -> int:
    """Triton's ``next_power_of_2``: the smallest power of two >= ``n`` (0 for 0)."""
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


class _AbsentValue:
    """Any attribute of an absent optional package: a decorator that leaves nothing
    callable behind, a type usable in annotations (``X | None``, ``X[...]``) and as a
    base class; never called for a result here."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, item: str) -> _AbsentValue:
        if item.startswith("__"):
            raise AttributeError(item)
        return _AbsentValue(f"{self._name}.{item}")

    def __call__(self, *args: Any, **kwargs: Any) -> _AbsentValue:
        return self

    def __or__(self, other: Any) -> _AbsentValue:
        return self

    __ror__ = __or__

    def __getitem__(self, item: Any) -> _AbsentValue:
        return self

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)


class _AbsentModule(types.ModuleType):
    """An optional package the venv lacks (and each of its submodules): every attribute
    is an :class:`_AbsentValue`."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []  # a package: its submodules import too

    def __getattr__(self, item: str) -> Any:
        if item.startswith("__"):
            raise AttributeError(item)
        return _AbsentValue(f"{self.__name__}.{item}")


class _AbsentFinder:
    """Imports a submodule of an absent optional package (or a module ``pattern``
    matches) as an :class:`_AbsentModule`."""

    def __init__(self, roots: tuple[str, ...], pattern: re.Pattern[str] | None = None) -> None:
        self._roots = roots
        self._pattern = pattern

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        import importlib.machinery

        if name.split(".", 1)[0] not in self._roots and not (
                self._pattern is not None and self._pattern.match(name)):
            return None
        return importlib.machinery.ModuleSpec(name, self)  # type: ignore[arg-type]

    def create_module(self, spec: Any) -> types.ModuleType:
        return _AbsentModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


_OPTIONAL_MODULES = ("llguidance", "xgrammar")
"""Optional packages a release imports on the way to the KV-cache planning and that its
oracle venv lacks: inert when absent. vLLM 0.25.1's ``kv_cache_utils`` imports
``v1.request``, whose structured-output grammar class annotates a field with
``llguidance.LLMatcher`` and ``xgrammar`` types (evaluated at class creation); no grammar
is built here."""

_CUTE_DSL_KERNELS = re.compile(r"^vllm\.models\.[a-z0-9_]+\.nvidia\.ops\.[a-z0-9_]+_cutedsl$")
"""Kernel modules of vLLM's own model packages written in the CuTe DSL: 0.30.0's
DeepSeek-V4 attention and compressor import them in their constructors (the kernel
objects are built, never launched here). They import the CUTLASS DSL and CUDA Python
bindings, GPU-only wheels the oracle venvs lack, so when ``cutlass`` is absent they are
inert (:class:`_AbsentModule`); ``cutlass`` itself stays absent, so that no capability
probe of vLLM's finds it."""


EMULATED_SM_COUNT = 132
"""The SM count FlashInfer's device query answers (an H200's): 0.33.0's ``FlashInferImpl``
sizes its multi-CTA KV counter buffer with ``get_device_sm_count(torch.device("cuda"))``
while the layer is built (flashinfer.py:2092-2101); no KV-cache shape reads it."""


def _flashinfer_sm_count() -> None:
    """``get_device_sm_count`` as vLLM's FlashInfer backend imported it answers
    :data:`EMULATED_SM_COUNT` (the CPU torch has no CUDA device to ask)."""
    try:
        from vllm.v1.attention.backends import flashinfer as backend
    except ImportError:  # a release or venv without FlashInfer: nothing asks
        return
    if hasattr(backend, "get_device_sm_count"):
        backend.get_device_sm_count = lambda device=None: EMULATED_SM_COUNT


WEIGHT_DOWNLOADS = (("pretrained_cfg", "model", "init_args", "model_args", "backbone_pretrained"),)
"""Config switches (key paths) that make a model's constructor download pretrained weights
from the Hub: a Terratorch model's backbone (terratorch's ``EncoderDecoderFactory`` loads
the backbone's checkpoint while it builds)."""


def without_weight_downloads(raw: dict[str, Any]) -> list[str]:
    """Turn off every ``WEIGHT_DOWNLOADS`` switch set in ``raw`` (in place); a note per
    switch turned off."""
    notes = []
    for path in WEIGHT_DOWNLOADS:
        holder: Any = raw
        for key in path[:-1]:
            holder = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and holder.get(path[-1]) is True:
            holder[path[-1]] = False
            notes.append(f"{'.'.join(path)} set to false (no weight download)")
    return notes


def start_models(stand_ins: Iterable[str] = ()) -> None:
    """vLLM started for model builds (idempotent); ``stand_ins``: more remote-code model
    types to give the stand-in config class (``STAND_IN_MODEL_TYPES`` always)."""
    if _STATE["started"]:
        return
    _STATE["stand_ins"] = frozenset(stand_ins)
    os.environ.setdefault("VLLM_PLUGINS", "")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    for extra in extra_paths():  # after the oracle folder, which start() puts first
        sys.path.append(extra)
    # torchvision's compiled ops do not load against a CPU torch; its fake-op
    # registrations (needed only to trace detection ops) are skipped, the image
    # transforms that multimodal model modules import still work.
    sys.modules["torchvision._meta_registrations"] = types.ModuleType(
        "torchvision._meta_registrations"
    )
    start(MODEL_CAPABILITY)
    import torch

    for module in INERT_MODULES:
        sys.modules[module] = _InertModule(module)
    import importlib.util

    absent = tuple(m for m in _OPTIONAL_MODULES if importlib.util.find_spec(m) is None)
    if absent:
        sys.meta_path.append(_AbsentFinder(absent))
    if importlib.util.find_spec("cutlass") is None:
        sys.meta_path.insert(0, _AbsentFinder((), _CUTE_DSL_KERNELS))

    for name in ("_C", "_moe_C", "_C_cache_ops", "_rocm_C", "_vllm_fa2_C", "_vllm_fa3_C",
                 "_flashkda_C"):
        setattr(torch.ops, name, _OpNamespace(getattr(torch.ops, name)))
    import vllm._custom_ops  # noqa: F401  (import-time capability queries)
    from vllm.triton_utils import importing, tl, triton

    if isinstance(triton, importing.TritonPlaceholder):
        triton.Config = _TritonConfig
        # OLMo-Hybrid's GDN layer registers Triton's allocator in its constructor
        triton.set_allocator = lambda allocator: None
        # Step5's kernel modules bind ``tl.extra.cuda.libdevice`` at import (its functions
        # are called inside kernels only, never while a model is built)
        if not hasattr(tl, "extra"):
            tl.extra = _AbsentValue("triton.language.extra")
        # Qwen4Exp's PLE n-gram embedding sizes a kernel block with it in its constructor
        # (vllm/models/qwen4_exp/common/ngram_embedding.py:446 in 0.30.0-0.32.0): a host
        # function of Triton's (the smallest power of two >= n), answered here as Triton does
        if not hasattr(triton, "next_power_of_2"):
            triton.next_power_of_2 = _next_power_of_2

    _STATE["permissive"] = True
    from vllm.model_executor.models import registry

    registry._run_in_subprocess = lambda fn: fn()
    # the registry logs and swallows any error while importing a model module, then
    # refuses the architecture as "failed to be inspected": here that error (a package
    # the venv lacks) reaches the harness, which then fails instead of recording it
    registry._try_inspect_model_cls = lambda arch, model: model.inspect_model_cls()
    from vllm.platforms import current_platform

    type(current_platform).log_warnings = classmethod(lambda cls: None)  # type: ignore[method-assign]
    from vllm.model_executor.layers import sparse_attn_indexer

    sparse_attn_indexer.has_deep_gemm = lambda: True
    if (importlib.util.find_spec("vllm.models.glm5next") is not None  # 0.30.0 on
            and importlib.util.find_spec("vllm.models.glm5next.nvidia.sparse_indexer")):
        # GLM-5.3's kpool indexer op asks the same in its constructor (0.31.0 on; 0.30.0's
        # glm5next has no such module)
        from vllm.models.glm5next.nvidia import sparse_indexer as glm5next_indexer

        glm5next_indexer.has_deep_gemm = lambda: True
    if importlib.util.find_spec("vllm.model_executor.layers.sparse_attn_indexer_kpool"):
        # 0.30.0: the kpool indexer op's module of its own asks it too (:918-921)
        from vllm.model_executor.layers import sparse_attn_indexer_kpool

        sparse_attn_indexer_kpool.has_deep_gemm = lambda: True
    _flashinfer_sm_count()
    torch.cuda.Stream = _NoStream  # type: ignore[misc]
    torch.cuda.Event = _NoStream  # type: ignore[misc]
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel

    init_distributed_environment(
        world_size=1,
        rank=0,
        local_rank=0,
        distributed_init_method=f"tcp://127.0.0.1:{os.environ.get('ORACLE_DIST_PORT', '29533')}",
        backend="gloo",
    )
    with set_current_vllm_config(VllmConfig()):
        initialize_model_parallel(1, 1)
    register_remote_configs()
    _STATE["started"] = True


def gpu_model_runner() -> None:
    """Let vLLM choose the model runner as on the emulated GPU, which has Triton:
    ``HAS_TRITON`` true where ``VllmConfig.use_v2_model_runner`` reads it
    (vllm/config/vllm.py:748-767 in 0.33.0; the CPU build has no Triton and falls back to
    Model Runner V1). The rest of that decision (the environment variable, the features
    Model Runner V2 does not support) stays vLLM's. Call after :func:`start_models`."""
    import vllm.config.vllm as vllm_config_module

    vllm_config_module.HAS_TRITON = True  # type: ignore[attr-defined]


def flashmla_mega_build() -> None:
    """Let DeepSeek-V4.1's FlashMLA mega-attention layer be built here, as on a GPU whose
    vLLM FlashMLA build has the mega-attention ops (vLLM 0.31.0 on; a release without the
    module is left as it is). Two things the CPU build cannot answer stand in:

    * ``is_flashmla_mega_attn_supported`` (nvidia/flash_mla_mega_attn.py:93-104 in 0.33.0)
      answers as vLLM's own code does once ``_flashmla_C`` has both ops: supported on an
      SM10x GPU, else vLLM's sm_10x reason (the emulated capability decides);
    * the unquantized linear layers carry an empty ``weight_scale`` and ``permute_on_load``
      is inert: the layer's ``__init__`` (:176-196) composes its weight loaders with
      permutations of the quantized ``wq_b`` / ``wo_a`` scales, which exist only with the
      checkpoint's quantization (the harness drops ``quantization_config``); they change
      weight loading only, never a cache spec or a backend choice.

    Call after :func:`start_models`."""
    import importlib.util

    if importlib.util.find_spec("vllm.models.deepseek_v41.nvidia.flash_mla_mega_attn") is None:
        return
    import torch
    from vllm.model_executor.layers import linear
    from vllm.models.deepseek_v41.nvidia import flash_mla_mega_attn as mega
    from vllm.platforms import current_platform

    def supported() -> tuple[bool, str | None]:
        if not current_platform.is_device_capability_family(100):
            return False, "FlashMLA mega attention requires sm_10x GPUs."
        return True, None

    mega.is_flashmla_mega_attn_supported = supported
    mega.permute_on_load = lambda param, perm, dim: None
    original = linear.UnquantizedLinearMethod.create_weights

    def create_weights(self: Any, layer: Any, *args: Any, **kwargs: Any) -> None:
        original(self, layer, *args, **kwargs)
        if not hasattr(layer, "weight_scale"):
            layer.register_parameter(
                "weight_scale", torch.nn.Parameter(torch.empty(0), requires_grad=False))

    linear.UnquantizedLinearMethod.create_weights = create_weights  # type: ignore[method-assign]


def engram_tokenizer() -> None:
    """A tokenizer stand-in for DeepSeek-V4.1's Engram layers, which load the checkpoint's
    tokenizer while built (common/engram.py:450-463 in 0.33.0: ``NgramHashState`` maps its
    tokens onto a compressed id space and refuses a size other than the config's
    ``engram_compressed_vocab_size``). The offline reference has no tokenizer files: for a
    model folder without them, ``AutoTokenizer.from_pretrained`` answers a word-level fast
    tokenizer of exactly ``engram_compressed_vocab_size`` distinct tokens (``t0``, ``t1``
    ...), so vLLM's own map and check run on it. The hash tables it seeds change no cache
    spec and no backend choice. Call after :func:`start_models`."""
    import json
    from pathlib import Path

    import transformers
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    original = transformers.AutoTokenizer.from_pretrained

    def from_pretrained(name: Any, *args: Any, **kwargs: Any) -> Any:
        folder = Path(str(name))
        config = folder / "config.json"
        if not config.is_file() or any(folder.glob("tokenizer*")):
            return original(name, *args, **kwargs)
        raw = json.loads(config.read_text(encoding="utf-8"))
        text = raw.get("text_config") or raw
        size = int(text["engram_compressed_vocab_size"])
        vocab = {f"t{i}": i for i in range(size)}
        backend = Tokenizer(WordLevel(vocab=vocab, unk_token="t0"))
        return transformers.PreTrainedTokenizerFast(tokenizer_object=backend)

    transformers.AutoTokenizer.from_pretrained = from_pretrained  # type: ignore[method-assign]
