"""vLLM's start-up of the multimodal encoder: the vision encoder's attention backend
(``get_vit_attn_backend``) and the encoder budget check (``compute_mm_encoder_budget``),
including vLLM's raise of the default ``max_num_batched_tokens`` for a multimodal
prefix-LM. Data: ``encoder.yaml`` of the engine profile (inherited whole); checked
against vLLM's own answers by tests/golden/test_encoder_oracle.py."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from selector.catalog import Catalog, CatalogError, EngineData, close_matches
from selector.errors import InputError
from selector.memory.issues import StartupIssue, startup_issue

__all__ = [
    "EncoderData",
    "EncoderReport",
    "EncoderSelection",
    "encoder_data",
    "encoder_report",
    "is_mm_prefix_lm",
    "max_tokens_per_item",
    "vit_backend",
    "vit_refusal",
]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class VitOrder(_Strict):
    min_cc: int
    backends: tuple[str, ...]


class VitBackend(_Strict):
    dtypes: tuple[str, ...]
    head_size_multiple_of: int | None = None
    min_head_size: int | None = None
    max_head_size: int | None = None
    fa4_max_head_size: int | None = None
    """The larger limit where FA4 is available (``fa4_cc_majors``)."""
    fa4_cc_majors: tuple[int, ...] = ()
    head_sizes: tuple[int, ...] | None = None
    min_cc: int | None = None
    max_cc: int | None = None
    source: str

    def _max_head_size(self, cc: int) -> int:
        assert self.max_head_size is not None
        if self.fa4_max_head_size is not None and cc // 10 in self.fa4_cc_majors:
            return self.fa4_max_head_size
        return self.max_head_size

    def supports(self, head_size: int, dtype: str, cc: int) -> bool:
        return (dtype in self.dtypes
                and (self.head_size_multiple_of is None or head_size % self.head_size_multiple_of == 0)
                and (self.min_head_size is None or head_size >= self.min_head_size)
                and (self.max_head_size is None or head_size <= self._max_head_size(cc))
                and (self.head_sizes is None or head_size in self.head_sizes)
                and (self.min_cc is None or cc >= self.min_cc)
                and (self.max_cc is None or cc <= self.max_cc))


class VitAttention(_Strict):
    source: str
    refusal_code: str
    enum_values: dict[str, str]
    enum_members: tuple[str, ...]
    orders: tuple[VitOrder, ...]
    unchecked: str
    backends: dict[str, VitBackend]

    def order(self, cc: int) -> tuple[str, ...]:
        return next(o.backends for o in self.orders if cc >= o.min_cc)


class EncoderTower(_Strict):
    tower: Literal["vit", "transformers"]
    source: str


class ImageTokens(_Strict):
    config_key: str
    processor_kwarg: str
    allowed: tuple[int, ...]


class VideoTokens(_Strict):
    max_frames: int
    frames_option: str
    tokens_per_frame: int


class FamilyTokens(_Strict):
    source: str
    image: ImageTokens | None = None
    video: VideoTokens | None = None
    audio: Literal["not_modelled"] | None = None


class TextConfigFlag(_Strict):
    key: str
    value: Any
    model_types: tuple[str, ...]


class Budget(_Strict):
    source: str
    refusal_code: str
    forced_by_prefix_lm_source: str
    prefix_lm_model_types: tuple[str, ...]
    prefix_lm_text_config: TextConfigFlag | None = None
    raise_code: str | None = None
    raise_source: str | None = None
    notice_code: str
    tokens_per_item: dict[str, FamilyTokens] = Field(default_factory=dict)


class EncoderData(_Strict):
    """``encoder.yaml`` of an engine profile."""

    engine: str
    vit_attention: VitAttention
    encoders: dict[str, EncoderTower]
    budget: Budget


class EncoderSelection(_Strict):
    """One encoder's attention: the backend vLLM selects (None: not selected by vLLM)."""

    encoder: str
    tower: str
    backend: str | None
    head_size: int | None
    dtype: str
    explicit: bool = False
    source: str = ""

    @property
    def message(self) -> str:
        """The selection in one line (a note of ``check``'s findings)."""
        if self.backend is None:
            return (f"{self.encoder} encoder: transformers' module ({self.source}); vLLM "
                    "selects no attention backend for it")
        size = f"head size {self.head_size}, " if self.head_size else ""
        how = ", --mm-encoder-attn-backend" if self.explicit else ""
        return f"{self.encoder} encoder attention: {self.backend} ({size}{self.dtype}{how}; {self.source})"


class EncoderReport(_Strict):
    """The encoder at start-up: each encoder's attention, the per-item tokens, the
    batched tokens vLLM runs with, notices (vLLM's log lines, what is not modelled)
    and vLLM's refusal."""

    encoders: tuple[EncoderSelection, ...] = ()
    tokens_per_item: dict[str, int] | None = None
    max_num_batched_tokens: int | None = None
    """The batched tokens after vLLM's raise of the default (None: unchanged)."""
    encoder_cache_size: int | None = None
    notices: tuple[tuple[str, str], ...] = ()
    """(code, message) notes."""
    issues: tuple[StartupIssue, ...] = ()
    notice_code: str = "MM010"

    def notes(self) -> tuple[tuple[str, str], ...]:
        """Every note as (code, message): each encoder's selection, then the notices."""
        return tuple((self.notice_code, e.message) for e in self.encoders) + self.notices


@lru_cache(maxsize=8)
def _load(path: Path) -> EncoderData:
    try:
        return EncoderData.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise CatalogError(f"{path}: {exc}") from None


def encoder_data(catalog: Catalog, engine: str | EngineData | None) -> EncoderData | None:
    """The engine's encoder data (None: the release's profile chain has none)."""
    path = catalog.engine_file(catalog.engine_of(engine).engine, "encoder.yaml")
    return None if path is None else _load(path)


def vit_backend(data: EncoderData, *, head_size: int, dtype: str, cc: int) -> str:
    """The backend ``get_vit_attn_backend`` returns when none is chosen."""
    vit = data.vit_attention
    for name in vit.order(cc):
        if name == vit.unchecked:
            return name
        spec = vit.backends.get(name)
        if spec is not None and spec.supports(head_size, dtype, cc):
            return name
    return vit.unchecked


def vit_refusal(catalog: Catalog, data: EncoderData, choice: str, cc: int) -> StartupIssue | None:
    """vLLM's assertion for an explicit ``--mm-encoder-attn-backend`` the platform does not
    list for ViT attention (None: accepted)."""
    vit = data.vit_attention
    supported = vit.order(cc)
    if choice in supported:
        return None
    listed = ", ".join(f"<AttentionBackendEnum.{name}: '{vit.enum_values.get(name, '')}'>"
                       for name in supported)
    return startup_issue(catalog, vit.refusal_code, ("mm_encoder_attn_backend",),
                         choice=choice, supported=listed, valid=", ".join(supported))


def _vision_head_size(raw: Mapping[str, Any]) -> int | None:
    """``vision_config.hidden_size // num_heads``, as every mapped ViT computes it."""
    vision = raw.get("vision_config")
    if not isinstance(vision, Mapping):
        return None
    hidden = vision.get("hidden_size")
    heads = vision.get("num_attention_heads", vision.get("num_heads"))
    if isinstance(hidden, int) and isinstance(heads, int) and heads > 0:
        return hidden // heads
    return None


def max_tokens_per_item(data: EncoderData, raw: Mapping[str, Any], *,
                        limit_mm_per_prompt: Mapping[str, Any],
                        mm_processor_kwargs: Mapping[str, Any],
                        every_modality: bool = False) -> tuple[dict[str, int] | None, list[str]]:
    """The family's ``get_mm_max_tokens_per_item`` for the modalities a prompt may hold
    (``every_modality``: for every modality the family supports, as
    ``EngineArgs._get_min_mm_batched_tokens`` asks, whatever their limits), and what is
    not modelled (None: the family's tokens are not modelled)."""
    family = data.budget.tokens_per_item.get(str(raw.get("model_type")))
    if family is None:
        return None, []
    gaps: list[str] = []
    tokens: dict[str, int] = {}
    vision = raw.get("vision_config")
    vision = vision if isinstance(vision, Mapping) else {}

    def active(modality: str) -> bool:
        limit = limit_mm_per_prompt.get(modality)
        count = limit.get("count", 1) if isinstance(limit, Mapping) else limit
        return every_modality or count is None or (isinstance(count, int) and count > 0)

    if family.image is not None and active("image"):
        value = vision.get(family.image.config_key)
        asked = mm_processor_kwargs.get(family.image.processor_kwarg)
        if asked is None and isinstance(mm_processor_kwargs.get("images_kwargs"), Mapping):
            asked = mm_processor_kwargs["images_kwargs"].get(family.image.processor_kwarg)
        if isinstance(asked, int) and asked in family.image.allowed:
            value = asked
        elif asked is not None:
            gaps.append(f"mm_processor_kwargs {family.image.processor_kwarg}={asked!r} is not one "
                        f"of {list(family.image.allowed)}: vLLM keeps "
                        f"vision_config.{family.image.config_key} for the budget")
        if isinstance(value, int):
            tokens["image"] = value
    if family.video is not None and active("video"):
        limit = limit_mm_per_prompt.get("video")
        frames = family.video.max_frames
        if isinstance(limit, Mapping) and isinstance(limit.get(family.video.frames_option), int):
            frames = min(frames, limit[family.video.frames_option])
        tokens["video"] = frames * family.video.tokens_per_frame
    if family.audio == "not_modelled" and isinstance(raw.get("audio_config"), Mapping) \
            and active("audio"):
        gaps.append("audio tokens per item come from the checkpoint's processor "
                    "(audio_seq_length): not modelled")
    return tokens, gaps


def is_mm_prefix_lm(budget: Budget, raw: Mapping[str, Any]) -> bool:
    if "is_mm_prefix_lm" in raw:
        return bool(raw["is_mm_prefix_lm"])
    model_type = str(raw.get("model_type"))
    flag = budget.prefix_lm_text_config
    if flag is not None and model_type in flag.model_types:
        text = raw.get("text_config")
        return isinstance(text, Mapping) and text.get(flag.key) == flag.value
    return model_type in budget.prefix_lm_model_types


def encoder_report(catalog: Catalog, data: EncoderData, raw: Mapping[str, Any], *, cc: int,
                   dtype: str, model_name: str, mm_encoder_attn_backend: str | None,
                   limit_mm_per_prompt: Mapping[str, Any], mm_processor_kwargs: Mapping[str, Any],
                   disable_chunked_mm_input: bool, max_num_batched_tokens: int | None,
                   default_max_num_batched_tokens: int) -> EncoderReport | None:
    """The encoder's start-up for a multimodal config (None: the config has no vision
    encoder)."""
    if not isinstance(raw.get("vision_config"), Mapping):
        return None
    model_type = str(raw.get("model_type"))
    notices: list[tuple[str, str]] = []
    issues: list[StartupIssue] = []
    code = data.budget.notice_code
    vit = data.vit_attention
    tower = data.encoders.get(model_type)
    choice = mm_encoder_attn_backend.upper() if mm_encoder_attn_backend else None
    if choice is not None and choice not in vit.enum_members:
        raise InputError(f"mm_encoder_attn_backend {mm_encoder_attn_backend!r} is not an "
                         f"attention backend of {data.engine}", field="mm_encoder_attn_backend",
                         hint=close_matches(choice, list(vit.enum_members))
                         or "the vision encoder takes " + ", ".join(vit.order(cc)))
    refused = vit_refusal(catalog, data, choice, cc) if choice is not None else None
    if refused is not None:
        issues.append(refused)
    encoders: list[EncoderSelection] = []
    head_size = _vision_head_size(raw)
    if tower is None:
        notices.append((code, f"vision encoder of {model_type}: how vLLM builds it is not "
                              "modelled (its attention backend is not checked)"))
    elif tower.tower == "transformers":
        encoders.append(EncoderSelection(encoder="vision", tower=tower.tower, backend=None,
                                         head_size=head_size, dtype=dtype, source=tower.source))
    elif head_size is not None and not issues:
        backend = choice or vit_backend(data, head_size=head_size, dtype=dtype, cc=cc)
        encoders.append(EncoderSelection(encoder="vision", tower=tower.tower, backend=backend,
                                         head_size=head_size, dtype=dtype,
                                         explicit=choice is not None, source=vit.source))
    budget = data.budget
    tokens, gaps = max_tokens_per_item(data, raw, limit_mm_per_prompt=limit_mm_per_prompt,
                                       mm_processor_kwargs=mm_processor_kwargs)
    notices.extend((code, gap) for gap in gaps)
    if tokens is None:
        notices.append((code, f"encoder tokens per item of {model_type}: vLLM counts the "
                              "processor's dummy inputs (the checkpoint's processor files); "
                              "the encoder budget check is not modelled"))
        return EncoderReport(encoders=tuple(encoders), notices=tuple(notices),
                             issues=tuple(issues), notice_code=code)
    prefix_lm = is_mm_prefix_lm(budget, raw)
    batched = max_num_batched_tokens
    raised = None
    largest = max(tokens.values(), default=0)
    if batched is None:
        batched = default_max_num_batched_tokens
        every, _ = max_tokens_per_item(data, raw, limit_mm_per_prompt=limit_mm_per_prompt,
                                       mm_processor_kwargs=mm_processor_kwargs,
                                       every_modality=True)
        floor = max((every or {}).values(), default=0)
        if prefix_lm and budget.raise_code is not None and every and floor > batched:
            modality = max(every, key=every.__getitem__)
            notices.append((budget.raise_code, catalog.code(budget.raise_code).message.format(
                old=batched, new=floor, modality=modality, model=model_name)))
            batched = raised = floor
    chunked_off = disable_chunked_mm_input or prefix_lm
    if tokens and chunked_off and largest > batched:
        issues.append(startup_issue(catalog, budget.refusal_code, ("max_num_batched_tokens",),
                                    max_tokens_per_mm_item=largest,
                                    max_num_batched_tokens=batched))
    cache = max(batched, largest) if tokens else None
    if cache is not None:
        notices.append((code, f"encoder cache: {cache:,} tokens (max(max_num_batched_tokens, the "
                              f"largest item); {budget.source}); its memory and the profile "
                              "run's multimodal pass are not in the memory estimate"))
    return EncoderReport(encoders=tuple(encoders), tokens_per_item=tokens,
                         max_num_batched_tokens=raised, encoder_cache_size=cache,
                         notices=tuple(notices), issues=tuple(issues), notice_code=code)
