"""vLLM's start-up of the multimodal encoder: the vision encoder's attention backend
(``get_vit_attn_backend``) and the encoder budget check (``compute_mm_encoder_budget``),
including vLLM's raise of the default ``max_num_batched_tokens`` for a multimodal
prefix-LM, the encoder cache and what the profile run keeps of the encoder's dummy
inputs. Data: ``encoder.yaml`` of the engine profile (a file with ``inherit: true``
patches the nearest older profile's); checked against each release's own answers by
tests/golden/test_encoder_oracle.py."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from selector.catalog import (
    Catalog,
    EngineData,
    close_matches,
)
from selector.errors import InputError
from selector.memory.budget import MemoryLine
from selector.memory.issues import StartupIssue, startup_issue

__all__ = [
    "EncoderData",
    "EncoderReport",
    "EncoderSelection",
    "FamilyTokens",
    "PixelTokens",
    "ProfileRun",
    "encoder_data",
    "encoder_memory_line",
    "encoder_report",
    "is_mm_prefix_lm",
    "max_tokens_per_item",
    "profile_run_items",
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
    hidden_keys: tuple[str, ...] = ("hidden_size",)
    """The ``vision_config`` keys of the tower's width, the first one given is read."""
    heads_keys: tuple[str, ...] = ("num_attention_heads", "num_heads")
    """The ``vision_config`` keys of its attention heads (head size: width // heads)."""


class ImageTokens(_Strict):
    config_key: str
    processor_kwarg: str
    allowed: tuple[int, ...]


class VideoTokens(_Strict):
    max_frames: int
    frames_option: str
    tokens_per_frame: int


class PixelTokens(_Strict):
    """Qwen-VL's image tokens under a pixel budget (``get_image_size_with_most_features``):
    the largest count of merged patches, at most ``max_pixels // unit**2`` (unit: the
    product of ``unit_keys`` of the vision config), that factors into a grid no more than
    ``max_ratio`` times wider than high."""

    kwarg: str
    """The ``--mm-processor-kwargs`` key vLLM reads (the flat one: the one recorded)."""
    default: int
    """The processor files' value (``size.longest_edge``)."""
    unit_keys: tuple[str, ...]
    max_ratio: int
    source: str

    def tokens(self, vision: Mapping[str, Any], max_pixels: int) -> int | None:
        unit = 1
        for key in self.unit_keys:
            value = vision.get(key)
            if not isinstance(value, int):
                return None
            unit *= value
        for count in range(max_pixels // (unit * unit), 0, -1):
            low = next(d for d in range(math.isqrt(count), 0, -1) if count % d == 0)
            if count // low / low <= self.max_ratio:
                return count
        return None


class FamilyTokens(_Strict):
    source: str
    image: ImageTokens | None = None
    video: VideoTokens | None = None
    audio: Literal["not_modelled"] | None = None
    from_info: bool = True
    """The processing info's ``get_mm_max_tokens_per_item`` answers (False: vLLM counts the
    processor's dummy inputs, and ``_get_min_mm_batched_tokens``, which reads only the
    processing info, has no floor for the raise of the default)."""
    recorded: dict[str, int] | None = None
    """vLLM's tokens per item with the family's published processor files (``processor``),
    no ``--mm-processor-kwargs`` and the config's own maximum length (recorded by
    tools/encoder_oracle.py)."""
    recorded_max_model_len: int | None = None
    seq_len_modalities: tuple[str, ...] = ()
    """Modalities whose count vLLM derives from ``max_model_len`` (Qwen-VL's video frames):
    the recorded value holds at the recorded length only."""
    processor: str | None = None
    """The processor files the recorded values assume (where they are published)."""
    recorded_config: dict[str, Any] = Field(default_factory=dict)
    """The config values the recorded counts were taken with, by dotted key
    (``vision_config.image_size``): a config of the model type with another value (another
    vision tower or tiling) leaves every recorded modality out, named."""
    pixels: PixelTokens | None = None


class TextConfigFlag(_Strict):
    key: str
    value: Any
    model_types: tuple[str, ...]


class ConfigPositive(_Strict):
    """A multimodal prefix-LM where the config's ``key`` is above 0 (DeepSeek-V4's
    ``vision_n_layers``: its vision variant)."""

    key: str
    model_types: tuple[str, ...]
    source: str


class ProfileRunData(_Strict):
    """The profile run's multimodal pass (``GPUModelRunner.profile_run``): the modality
    with the most tokens per item, ``MultiModalBudget``'s items per batch of it, encoded
    and kept in the encoder cache while the decoder's dummy run measures the peak."""

    source: str
    items_source: str
    output_width_key: str
    """The text config's key of the embedding width the encoder outputs take (they are
    merged into the decoder's input embeddings)."""
    log: str
    """vLLM's log line of the pass (``{budget}``, ``{items}``, ``{modality}``)."""
    chunked_prefill: bool
    """``enable_chunked_prefill`` of the scheduler vLLM runs (V1: on), which drops the
    decoder's ``max_num_batched_tokens // tokens`` limit of the items."""


class Budget(_Strict):
    source: str
    refusal_code: str
    forced_by_prefix_lm_source: str
    prefix_lm_model_types: tuple[str, ...]
    prefix_lm_text_config: TextConfigFlag | None = None
    prefix_lm_config_positive: tuple[ConfigPositive, ...] = ()
    raise_code: str | None = None
    raise_source: str | None = None
    notice_code: str
    default_limit_per_prompt: int
    """What ``MultiModalConfig.get_limit_per_prompt`` answers for a modality
    ``--limit-mm-per-prompt`` does not name."""
    default_limit_source: str
    profile_run: ProfileRunData
    tokens_per_item: dict[str, FamilyTokens | None] = Field(default_factory=dict)
    """Each model type's tokens per item; ``null`` (a newer release's patch over an older
    one's row): vLLM's answer was not recorded for this release, so the family's tokens
    are not modelled here (a notice), whatever an older release recorded."""


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


class ProfileRun(_Strict):
    """What the profile run encodes (``MultiModalBudget``) and the encoder outputs it keeps
    while the decoder's dummy run measures the peak."""

    modality: str
    items: int
    tokens_per_item: int
    encoder_budget: int
    width: int | None = None
    """The embedding width of each output row (None: not in the config)."""
    dtype_bytes: int = 2

    @property
    def bytes(self) -> int | None:
        """At most ``items x tokens x width x dtype`` bytes (an item's output rows are its
        embeddings, no more than its tokens); None without the width."""
        if self.width is None:
            return None
        return self.items * self.tokens_per_item * self.width * self.dtype_bytes


class EncoderReport(_Strict):
    """The encoder at start-up: each encoder's attention, the per-item tokens, the
    batched tokens vLLM runs with, notices (vLLM's log lines, what is not modelled)
    and vLLM's refusal."""

    encoders: tuple[EncoderSelection, ...] = ()
    tokens_per_item: dict[str, int] | None = None
    max_num_batched_tokens: int | None = None
    """The batched tokens after vLLM's raise of the default (None: unchanged)."""
    encoder_cache_size: int | None = None
    profile_run: ProfileRun | None = None
    """The profile run's multimodal pass (None: no tokens per item, or no item fits)."""
    notices: tuple[tuple[str, str], ...] = ()
    """(code, message) notes."""
    issues: tuple[StartupIssue, ...] = ()
    notice_code: str = "MM010"

    def notes(self) -> tuple[tuple[str, str], ...]:
        """Every note as (code, message): each encoder's selection, then the notices."""
        return tuple((self.notice_code, e.message) for e in self.encoders) + self.notices


ENCODER_FILE = "encoder.yaml"


def encoder_data(catalog: Catalog, engine: str | EngineData | None) -> EncoderData | None:
    """The engine's encoder data (None: the release's profile chain has none)."""
    return catalog.patched_data(engine, ENCODER_FILE, EncoderData)


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


def _first(config: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    value = next((config[key] for key in keys if key in config), None)
    return value if isinstance(value, int) else None


def _vision_head_size(raw: Mapping[str, Any], tower: EncoderTower | None) -> int | None:
    """``vision_config`` width // heads, by the keys the encoder's row names."""
    vision = raw.get("vision_config")
    if not isinstance(vision, Mapping):
        return None
    keys = tower or EncoderTower(tower="vit", source="")
    hidden, heads = _first(vision, keys.hidden_keys), _first(vision, keys.heads_keys)
    if hidden is not None and heads is not None and heads > 0:
        return hidden // heads
    return None


def max_tokens_per_item(data: EncoderData, raw: Mapping[str, Any], *,
                        limit_mm_per_prompt: Mapping[str, Any],
                        mm_processor_kwargs: Mapping[str, Any],
                        every_modality: bool = False,
                        max_model_len: int | None = None) -> tuple[dict[str, int] | None, list[str]]:
    """The family's tokens per item for the modalities a prompt may hold, as the encoder
    budget takes them (``get_mm_max_toks_per_item``); with ``every_modality`` the
    processing info's ``get_mm_max_tokens_per_item`` for every modality the family
    supports, whatever their limits, as ``EngineArgs._get_min_mm_batched_tokens`` asks it
    (None where the processing info has no answer); and what is not modelled (None: the
    family's tokens are not modelled)."""
    family = data.budget.tokens_per_item.get(str(raw.get("model_type")))
    if family is None:
        return None, []
    if family.recorded is not None:
        if every_modality and not family.from_info:
            return None, []
        return _recorded_tokens(family, raw, limit_mm_per_prompt, mm_processor_kwargs,
                                every_modality, max_model_len)
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


def _recorded_tokens(family: FamilyTokens, raw: Mapping[str, Any],
                     limit_mm_per_prompt: Mapping[str, Any], mm_processor_kwargs: Mapping[str, Any],
                     every_modality: bool,
                     max_model_len: int | None) -> tuple[dict[str, int], list[str]]:
    """The recorded tokens per item of the modalities a prompt may hold (a limit of 0
    turns a modality off), the pixel budget's image tokens where ``--mm-processor-kwargs``
    sets it, and the gaps: a modality whose count the kwargs or another maximum length
    change and the data does not model is left out, named."""
    assert family.recorded is not None
    vision = raw.get("vision_config")
    vision = vision if isinstance(vision, Mapping) else {}
    tokens: dict[str, int] = {}
    gaps: list[str] = []
    differs = {key: value for key, value in family.recorded_config.items()
               if _dotted(raw, key) != value}
    if differs:
        for modality in family.recorded:
            gaps.append(f"{modality} tokens per item of a config with "
                        + ", ".join(f"{key}={_dotted(raw, key)!r}" for key in differs)
                        + ": not modelled (recorded with "
                        + ", ".join(f"{key}={value!r}" for key, value in differs.items())
                        + f": {family.processor})")
        return tokens, gaps
    pixels = family.pixels
    # only the flat pixel kwarg is modelled (the one recorded); any other key, scoped
    # images_kwargs / videos_kwargs included, leaves the modalities out, named
    other = sorted(set(mm_processor_kwargs) - ({pixels.kwarg} if pixels is not None else set()))
    for modality, value in family.recorded.items():
        limit = limit_mm_per_prompt.get(modality)
        count = limit.get("count", 1) if isinstance(limit, Mapping) else limit
        if not every_modality and isinstance(count, int) and count <= 0:
            continue
        if modality == "image" and pixels is not None:
            asked = mm_processor_kwargs.get(pixels.kwarg)
            if isinstance(asked, int) and asked != pixels.default and not other:
                got = pixels.tokens(vision, asked)
                if got is not None:
                    tokens[modality] = got
                    continue
        if other or (modality != "image" and pixels is not None
                     and mm_processor_kwargs.get(pixels.kwarg) not in (None, pixels.default)):
            gaps.append(f"{modality} tokens per item with mm_processor_kwargs "
                        f"{dict(mm_processor_kwargs)}: not modelled (recorded with the "
                        f"published processor files only: {family.processor})")
            continue
        if modality in family.seq_len_modalities and max_model_len is not None \
                and max_model_len != family.recorded_max_model_len:
            gaps.append(f"{modality} tokens per item at max_model_len {max_model_len:,}: not "
                        f"modelled (vLLM derives its frames from the maximum length; recorded "
                        f"at {family.recorded_max_model_len:,})")
            continue
        tokens[modality] = value
    return tokens, gaps


def _dotted(raw: Mapping[str, Any], key: str) -> Any:
    """The config's value at a dotted key (None where a part is missing)."""
    value: Any = raw
    for part in key.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _limit(limit_mm_per_prompt: Mapping[str, Any], modality: str, default: int) -> int:
    """``MultiModalConfig.get_limit_per_prompt``: the count given, else the default."""
    given = limit_mm_per_prompt.get(modality)
    count = given.get("count", default) if isinstance(given, Mapping) else given
    return count if isinstance(count, int) else default


def profile_run_items(budget: Budget, tokens: Mapping[str, int], *, max_num_batched_tokens: int,
                      limit_mm_per_prompt: Mapping[str, Any], max_model_len: int,
                      max_num_seqs: int) -> tuple[str, int, int] | None:
    """(modality, items per batch, encoder budget) of vLLM's profile run
    (``MultiModalBudget.get_modality_with_max_tokens`` and ``_get_max_items``; the encoder
    budget is ``min(compute budget, cache size)``, both ``max(max_num_batched_tokens,
    largest item)``); None when no modality is active."""
    if not tokens:
        return None
    modality, per_item = max(tokens.items(), key=lambda item: (item[1], item[0]))
    encoder_budget = max(max_num_batched_tokens, per_item)
    if per_item == 0:
        return modality, 0, encoder_budget
    encoder_items = encoder_budget // per_item
    limit = _limit(limit_mm_per_prompt, modality, budget.default_limit_per_prompt)
    per_prompt = max(1, min(limit, max_model_len // per_item))
    seqs = max_num_seqs if budget.profile_run.chunked_prefill \
        else min(max_num_seqs, max_num_batched_tokens // per_item)
    return modality, max(1, min(encoder_items, seqs * per_prompt)), encoder_budget


def encoder_memory_line(report: EncoderReport | None, data: EncoderData | None) -> MemoryLine | None:
    """The memory table's line of the profile run's encoder outputs (None: nothing kept,
    or the width is unknown)."""
    run = report.profile_run if report is not None else None
    if run is None or run.bytes is None or data is None or run.items == 0:
        return None
    return MemoryLine(
        name="encoder outputs (profile run)", bytes=run.bytes, basis="estimate",
        detail=(f"at most {run.items} {run.modality} item{'s' if run.items > 1 else ''} x "
                f"{run.tokens_per_item:,} tokens x {run.width:,} x {run.dtype_bytes} bytes, kept in "
                "the encoder cache through the dummy and sampler runs "
                f"({data.budget.profile_run.source}); "
                "the dummy inputs and the encoder's own activations are not counted"))


def _row_reads(family: FamilyTokens | None, raw: Mapping[str, Any]) -> bool:
    """Whether a config without ``vision_config`` is the family's multimodal model: the
    model type has a row, for the config's architecture where the row names one (DeepSeek-V4's
    text model shares the multimodal model's type)."""
    if family is None:
        return False
    architectures = family.recorded_config.get("architectures")
    return architectures is None or raw.get("architectures") == architectures


def is_mm_prefix_lm(budget: Budget, raw: Mapping[str, Any]) -> bool:
    if "is_mm_prefix_lm" in raw:
        return bool(raw["is_mm_prefix_lm"])
    model_type = str(raw.get("model_type"))
    for positive in budget.prefix_lm_config_positive:
        if model_type in positive.model_types:
            value = raw.get(positive.key)
            return isinstance(value, int) and value > 0
    flag = budget.prefix_lm_text_config
    if flag is not None and model_type in flag.model_types:
        text = raw.get("text_config")
        return isinstance(text, Mapping) and text.get(flag.key) == flag.value
    return model_type in budget.prefix_lm_model_types


def encoder_report(catalog: Catalog, data: EncoderData, raw: Mapping[str, Any], *, cc: int,
                   dtype: str, model_name: str, mm_encoder_attn_backend: str | None,
                   limit_mm_per_prompt: Mapping[str, Any], mm_processor_kwargs: Mapping[str, Any],
                   disable_chunked_mm_input: bool, max_num_batched_tokens: int | None,
                   default_max_num_batched_tokens: int, max_model_len: int | None = None,
                   max_num_seqs: int | None = None, dtype_bytes: int = 2) -> EncoderReport | None:
    """The encoder's start-up for a multimodal config (None: the config has no vision
    encoder and its model type no tokens per item: an audio tower, Bagel's ``vit_config``
    or Moondream's are read only by a row of ``tokens_per_item``). ``max_model_len`` and
    ``max_num_seqs`` (the resolved ones) size the profile run's items (without them no
    profile run is reported)."""
    model_type = str(raw.get("model_type"))
    has_vision = isinstance(raw.get("vision_config"), Mapping)
    if not has_vision and not _row_reads(data.budget.tokens_per_item.get(model_type), raw):
        return None
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
    head_size = _vision_head_size(raw, tower)
    if tower is None:
        notices.append((code, f"{'vision ' if has_vision else ''}encoder of {model_type}: how "
                              "vLLM builds it is not modelled (its attention backend is not "
                              "checked)"))
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
                                       mm_processor_kwargs=mm_processor_kwargs,
                                       max_model_len=max_model_len)
    notices.extend((code, gap) for gap in gaps)
    if tokens is None:
        notices.append((code, f"encoder tokens per item of {model_type}: vLLM counts them "
                              "with the checkpoint's processor files (its processing info or "
                              "the processor's dummy inputs); the encoder budget check and the "
                              "profile run's encoder outputs are not modelled"))
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
                                       every_modality=True, max_model_len=max_model_len)
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
    run = None
    over_budget = any(issue.code == budget.refusal_code for issue in issues)
    items = None if over_budget or max_model_len is None or max_num_seqs is None \
        else profile_run_items(
        budget, tokens, max_num_batched_tokens=batched, limit_mm_per_prompt=limit_mm_per_prompt,
        max_model_len=max_model_len, max_num_seqs=max_num_seqs)
    if items is not None:
        text = raw.get("text_config")
        width = (text if isinstance(text, Mapping) else raw).get(budget.profile_run.output_width_key)
        run = ProfileRun(modality=items[0], items=items[1], tokens_per_item=tokens[items[0]],
                         encoder_budget=items[2], width=width if isinstance(width, int) else None,
                         dtype_bytes=dtype_bytes)
    if cache is not None:
        how = (f"; the profile run encodes {run.items} {run.modality} item"
               f"{'s' if run.items != 1 else ''} of {run.tokens_per_item:,} tokens "
               f"({budget.profile_run.items_source}) and keeps the outputs (the memory "
               "table); vLLM logs: " + budget.profile_run.log.format(
                   budget=run.encoder_budget, items=run.items, modality=run.modality)
               if run is not None and run.items else "")
        notices.append((code, f"encoder cache: {cache:,} tokens (max(max_num_batched_tokens, the "
                              f"largest item); {budget.source}){how}"))
    return EncoderReport(encoders=tuple(encoders), tokens_per_item=tokens,
                         max_num_batched_tokens=raised, encoder_cache_size=cache,
                         profile_run=run, notices=tuple(notices), issues=tuple(issues),
                         notice_code=code)
