"""Typed configuration: dataclasses loaded from YAML presets with ``key=value`` overrides.

Every config is a (frozen or plain) dataclass whose fields carry metadata made by :func:`cfg`:
a help string, an optional closed range ``(low, high)`` and optional ``choices``. Loading checks,
before anything starts:

* unknown keys (names the key and lists the allowed ones),
* wrong types (names the key, the value and the expected type),
* out-of-range values / values outside ``choices`` (names the key, the value and the range).

YAML presets hold values only; they are read with ``yaml.safe_load`` (no code, no tags).

Example::

    @dataclass
    class LoopConfig:
        rate_hz: float = cfg(20.0, "control rate", range=(1.0, 1000.0))

    c = load_config(LoopConfig, "configs/run/default.yaml", ["rate_hz=50"])
"""

from __future__ import annotations

import dataclasses
import numbers
import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from edge.errors import EdgeError

_FLOAT_EXP = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")

T = TypeVar("T")


class ConfigError(EdgeError, ValueError):
    """A configuration value is unknown, mistyped or out of range. The message says what to do."""


def cfg(
    default: Any = dataclasses.MISSING,
    help: str = "",
    *,
    range: tuple[float | None, float | None] | None = None,
    choices: tuple[Any, ...] | None = None,
    default_factory: Any = dataclasses.MISSING,
) -> Any:
    """A dataclass field with documentation and validation metadata."""
    meta = {"help": help, "range": range, "choices": choices}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Return ``value`` converted to ``tp`` where that is lossless, else raise ConfigError."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key)
            except ConfigError as err:
                errors.append(str(err))
        raise ConfigError(f"{key}={value!r}: expected {_type_name(tp)}")
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{key}={value!r}: expected a mapping for section {_type_name(tp)}")
        return from_dict(tp, value, prefix=f"{key}.")
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}={value!r}: expected a list")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                raise ConfigError(f"{key}={value!r}: expected {len(args)} values")
            return tuple(_coerce(v, a, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
        inner = args[0] if args else Any
        out = [_coerce(v, inner, f"{key}[{i}]") for i, v in enumerate(value)]
        return tuple(out) if origin is tuple else out
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}={value!r}: expected a mapping")
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}={value!r}: expected true/false")
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}={value!r}: expected an integer")
        return value
    if tp is float:
        if isinstance(value, str) and _FLOAT_EXP.fullmatch(value.strip()):
            value = float(value)  # YAML 1.1 reads "3e-4" (no dot) as a string
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}={value!r}: expected a number")
        return float(value)
    if tp is str:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # YAML and --set read "0" or "300" as numbers: a str field takes their text
        if not isinstance(value, str):
            raise ConfigError(f"{key}={value!r}: expected a string")
        return value
    if isinstance(tp, type) and not isinstance(value, tp):
        raise ConfigError(f"{key}={value!r}: expected {_type_name(tp)}")
    return value


def check_fields(obj: Any) -> None:
    """Validate ranges and choices declared with :func:`cfg`. Call from ``__post_init__``."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        rng = f.metadata.get("range")
        choices = f.metadata.get("choices")
        values = value if isinstance(value, (tuple, list)) else (value,)
        for v in values:
            if rng is not None and f.type in ("int", "float", int, float) and not isinstance(v, numbers.Real):
                raise ConfigError(f"{f.name}={v!r} is not a number (allowed {rng[0]}..{rng[1]})")
            if choices is not None and v not in choices:
                raise ConfigError(
                    f"{f.name}={v!r} is not allowed; choose one of {', '.join(map(repr, choices))}"
                )
            if rng is not None and isinstance(v, (int, float)) and not isinstance(v, bool):
                lo, hi = rng
                if (lo is not None and v < lo) or (hi is not None and v > hi) or v != v:
                    lo_s = "-inf" if lo is None else lo
                    hi_s = "inf" if hi is None else hi
                    raise ConfigError(f"{f.name}={v!r} is out of range; allowed [{lo_s}, {hi_s}]")


def from_dict(cls: type[T], data: dict[str, Any], prefix: str = "") -> T:
    """Build ``cls`` from a mapping, rejecting unknown keys and wrong types."""
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix or 'config'}: expected a mapping, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"unknown key {prefix}{unknown[0]!s}; allowed keys: {', '.join(prefix + k for k in fields)}"
        )
    kwargs = {k: _coerce(v, hints[k], prefix + k) for k, v in data.items()}
    try:
        return cls(**kwargs)
    except ConfigError as err:
        raise ConfigError(f"{prefix}{err}") from None


def to_dict(obj: Any) -> dict[str, Any]:
    """Plain-data view of a config (tuples as lists), for manifests and YAML dumps."""

    def plain(v: Any) -> Any:
        if dataclasses.is_dataclass(v):
            return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v

    return plain(obj)


def flatten(data: dict[str, Any], prefix: str = "", opaque: tuple[str, ...] = ()) -> dict[str, Any]:
    """Leaves of a nested mapping by dotted path (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``); a mapping
    under a key in ``opaque`` is kept whole, as one leaf."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        if isinstance(v, dict) and k not in opaque:
            out.update(flatten(v, f"{prefix}{k}.", opaque))
        else:
            out[prefix + k] = v
    return out


def differences(saved: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(dotted key, saved value, new value) of every leaf where two nested settings differ, by key."""
    a, b = flatten(saved), flatten(new)
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def describe_differences(diffs: list[tuple[str, Any, Any]], most: int = 5) -> str:
    """``key=saved (now new), ...`` of the first ``most`` differences, and how many more."""
    shown = ", ".join(f"{k}={a!r} (now {b!r})" for k, a, b in diffs[:most])
    return shown + (f" and {len(diffs) - most} more" if len(diffs) > most else "")


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"loop.rate_hz=50"`` -> (["loop", "rate_hz"], 50). Values are parsed as YAML scalars."""
    import yaml

    if "=" not in text:
        raise ConfigError(f"--set {text!r}: give key=value (a setting's dotted name, '=', its value; the command's --help lists its settings)")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key:
        raise ConfigError(f"override {text!r} has an empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as err:
        raise ConfigError(f"override {text!r}: cannot parse value: {err}") from None
    return key.split("."), value


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping; errors name the file."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {p} " + ("is a directory: give a YAML file in it" if p.is_dir() else "does not exist"))
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {p}: invalid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {p}: top level must be a mapping of keys to values")
    return data


def load_config(
    cls: type[T], path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()
) -> T:
    """Defaults <- YAML file <- overrides, validated before anything starts."""
    data: dict[str, Any] = read_yaml(path) if path else {}
    for text in overrides:
        keys, value = parse_override(text)
        node = data
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {text!r}: {k} is not a section")
        node[keys[-1]] = value
    try:
        return from_dict(cls, data)
    except ConfigError as err:
        raise ConfigError(f"{err}{source_note(path, overrides, str(err))}") from None


def source_note(path: str | Path | None, overrides: list[str] | tuple[str, ...], message: str = "") -> str:
    """Where a bad value may have come from, for the error message: `` (from FILE)``, or the
    override that set the key the ``message`` starts with (``steps=0 is out of range``), etc."""
    named = [o for o in overrides if message.startswith(o.partition("=")[0].strip() + "=")]
    if named:
        return f" (from {named[-1]} on the command line)"
    if path and overrides:
        return f" (from {path} or the --set overrides)"
    return f" (from {path})" if path else (" (from the --set overrides)" if overrides else "")


def layer_config(base: T, path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> T:
    """``base`` (a config instance) <- YAML file <- ``key=value`` overrides, validated."""
    data = to_dict(base)
    for k, v in (read_yaml(path) if path else {}).items():
        data[k] = v
    for text in overrides:
        keys, value = parse_override(text)
        node = data
        for i, k in enumerate(keys[:-1]):
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {text}: {'.'.join(keys[:i + 1])} is a setting, not a section of "
                                  "settings; give it a value (e.g. --set "
                                  f"{'.'.join(keys[:i + 1])}=…)")
        node[keys[-1]] = value
    try:
        return from_dict(type(base), data)
    except ConfigError as err:
        raise ConfigError(f"{err}{source_note(path, overrides, str(err))}") from None


def describe(cls: type) -> str:
    """One line per field: name, type, default, range/choices, help — for --help epilogues."""
    lines = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else "…"
        extra = ""
        if f.metadata.get("range"):
            extra = f" range={list(f.metadata['range'])}"
        if f.metadata.get("choices"):
            extra = f" choices={list(f.metadata['choices'])}"
        lines.append(f"  {f.name} ({_type_name(hints[f.name])}, default {default!r}{extra}): "
                     f"{f.metadata.get('help', '')}")
    return "\n".join(lines)
