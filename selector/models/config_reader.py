"""Typed, error-reporting access to the keys of a raw config.json mapping."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from selector.errors import InputError

if TYPE_CHECKING:
    from selector.models.config_defaults import ClassDefaults, UsedDefault

__all__ = ["ConfigReader"]

_MISSING = object()


class ConfigReader:
    """Reads one (possibly nested) section of a config.json.

    Every failure is an :class:`InputError` naming the file and the dotted field.
    """

    def __init__(
        self,
        data: Mapping[str, Any],
        file: str,
        prefix: str = "",
        *,
        aliases: Mapping[str, Sequence[str]] | None = None,
        defaults: Mapping[str, Any] | None = None,
        class_defaults: ClassDefaults | None = None,
        used: dict[str, UsedDefault] | None = None,
    ) -> None:
        self.data = data
        self.file = file
        self.prefix = prefix
        self.aliases: Mapping[str, Sequence[str]] = aliases or {}
        self.defaults: Mapping[str, Any] = defaults or {}
        self.class_defaults = class_defaults
        self.used: dict[str, UsedDefault] = used if used is not None else {}
        """Every field read from ``class_defaults`` (shared by the readers derived from this
        one), by its dotted name."""

    def _copy(self, data: Mapping[str, Any], **changes: Any) -> ConfigReader:
        rules: dict[str, Any] = {"aliases": self.aliases, "defaults": self.defaults,
                                 "class_defaults": self.class_defaults, "used": self.used,
                                 **changes}
        return ConfigReader(data, self.file, self.prefix, **rules)

    def with_rules(
        self, aliases: Mapping[str, Sequence[str]], defaults: Mapping[str, Any]
    ) -> ConfigReader:
        """The same section read with a family's field aliases (other names a
        config may use) and its config class's defaults for omitted fields."""
        return self._copy(self.data, aliases=aliases, defaults=defaults)

    def with_class_defaults(self, class_defaults: ClassDefaults | None) -> ConfigReader:
        """The same section with its config class's defaults (vLLM's ``AutoConfig`` class
        of the section's model type) for the fields the section leaves out; a field
        present with the value null stays null, as the class keeps it."""
        return self._copy(self.data, class_defaults=class_defaults)

    def with_fields(self, reads: Mapping[str, str]) -> ConfigReader:
        """The same section with each canonical field read from the field a model class
        reads in its place (``{num_hidden_layers: decoder_layers}``; a dotted path into a
        nested section, ``config.text.dim``), where present."""
        data = {**self.data, **{canonical: self._at(source) for canonical, source in reads.items()
                                if self._at(source) is not None}}
        return self._copy(data)

    def _at(self, path: str) -> Any:
        """The value at ``path``: a key, or a dotted path into nested objects (DBRX's
        ``attn_config.kv_n_heads``) when no key has that name."""
        if "." not in path or path in self.data:
            return self.data.get(path)
        value: Any = self.data
        for part in path.split("."):
            if not isinstance(value, Mapping):
                return None
            value = value.get(part)
        return value

    def key_of(self, key: str) -> str:
        """The name ``key`` has in the file (an alias when only that is present)."""
        if self.data.get(key) is None:
            for alias in self.aliases.get(key, ()):
                if self._at(alias) is not None:
                    return alias
        return key

    def _present(self, path: str) -> bool:
        """``path`` is a key of the section (with any value, null included)."""
        if path in self.data:
            return True
        value: Any = self.data
        for part in path.split("."):
            if not isinstance(value, Mapping) or part not in value:
                return False
            value = value[part]
        return True

    def _class_default(self, key: str) -> Any:
        """The config class's default of ``key`` when the section has neither it nor any
        of its other names (recorded in ``used``)."""
        defaults = self.class_defaults
        found = defaults.default(key) if defaults is not None else None
        if defaults is None or found is None:
            return None
        name, value = found
        names = (key, name, *self.aliases.get(key, ()))
        if any(self._present(n) for n in names):
            return None
        self.used.setdefault(self.prefix + key, defaults.used(self.prefix + key, name))
        return value

    def _get(self, key: str) -> Any:
        value = self._at(self.key_of(key))
        if value is None:
            # the section's own config class's recorded default first (vLLM reads the
            # section through it), else the family's (the defaults of its model class's
            # config class: families.yaml, equal where both are recorded)
            recorded = self._class_default(key)
            return recorded if recorded is not None else self.defaults.get(key)
        return value

    def error(self, key: str, message: str, hint: str | None = None) -> InputError:
        return InputError(message, file=self.file, field=self.prefix + self.key_of(key), hint=hint)

    def written(self, key: str) -> bool:
        """The file itself writes ``key`` (any value; no alias, family or class default)."""
        return self._present(key)

    def has(self, key: str) -> bool:
        return self._get(key) is not None

    def raw(self, key: str) -> Any:
        return self._get(key)

    def section(self, key: str) -> ConfigReader | None:
        value = self._get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self.error(key, f"expected an object, got {_kind(value)}")
        return ConfigReader(value, self.file, f"{self.prefix}{key}.", used=self.used)

    def int_(self, key: str, default: Any = _MISSING, *, minimum: int = 1) -> int:
        value = self._get(key)
        if value is None:
            if default is _MISSING:
                raise self.error(key, "missing required field")
            return int(default)
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise self.error(key, f"expected an integer, got {_kind(value)}")
        if value < minimum:
            raise self.error(key, f"must be >= {minimum}, got {value}")
        return value

    def opt_int(self, key: str, *, minimum: int = 1) -> int | None:
        if self._get(key) is None:
            return None
        return self.int_(key, minimum=minimum)

    def opt_float(self, key: str) -> float | None:
        value = self._get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, f"expected a number, got {_kind(value)}")
        if not math.isfinite(value):
            raise self.error(key, f"expected a finite number, got {value}")
        return float(value)

    def bool_(self, key: str, default: bool = False) -> bool:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {_kind(value)}")
        return value

    def str_(self, key: str, default: str | None = None) -> str | None:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {_kind(value)}")
        return value

    def str_list(self, key: str) -> list[str] | None:
        value = self._get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, f"expected a list of strings, got {_kind(value)}")
        return list(value)

    def int_list(self, key: str, *, minimum: int = 0) -> list[int] | None:
        value = self._get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= minimum for v in value
        ):
            raise self.error(key, f"expected a list of integers >= {minimum}, got {_kind(value)}")
        return list(value)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"string {text!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__
