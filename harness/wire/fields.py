"""A message's fields checked against its dataclass annotations, and split into a JSON header and raw arrays.

The rule of the wire, apart from which messages exist (`harness.wire.messages`): a field annotated `np.ndarray` (or
`dict[str, np.ndarray]`) travels as raw float64 arrays, everything else in the JSON header, checked on the way in
against its annotation (str, int, float, bool, lists, objects with string keys, nested records, `| None`).  A value
that does not fit raises `ProtocolError` naming the exact place, whatever a hostile child sends.
"""
from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.wire.protocol import ProtocolError

# Each annotation is turned once into a checking function, and each message class into a plan of its fields: a frame
# crosses the boundary about 140 times per submission, and reading the annotations afresh each time cost the grader
# more than the frames themselves.
@functools.lru_cache(maxsize=None)
def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _is_array_type(tp) -> bool:
    return tp is np.ndarray or (typing.get_origin(tp) is dict and typing.get_args(tp)[1] is np.ndarray) or (
        _optional(tp) is not None and _is_array_type(_optional(tp)))


def _optional(tp):
    """X for `X | None`, else None."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and type(None) in typing.get_args(tp):
            return args[0]
    return None


@functools.lru_cache(maxsize=None)
def _checker(tp):  # noqa: C901 - one branch per kind of annotation, in one place
    """The function (value, where) -> value that checks a JSON value against `tp`, made once per annotation.
    Items of a list or an object are checked without their own path; only when one fails is the check run again
    item by item, so that the message names the exact place."""
    if tp is Any:
        return lambda value, where: value
    inner = _optional(tp)
    if inner is not None:
        check_inner = _checker(inner)
        return lambda value, where: None if value is None else check_inner(value, where)
    origin = typing.get_origin(tp)
    if origin is list:
        (item,) = typing.get_args(tp)
        check_item = _checker(item)

        def check_list(value, where):
            if not isinstance(value, list):
                raise ProtocolError(f"{where}: expected a list, got {type(value).__name__}")
            try:
                return [check_item(v, where) for v in value]
            except ProtocolError:
                for i, v in enumerate(value):
                    check_item(v, f"{where}[{i}]")
                raise
        return check_list
    if origin is dict:
        key, item = typing.get_args(tp)
        check_item = _checker(item)

        def check_dict(value, where):
            if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
                raise ProtocolError(f"{where}: expected an object with string keys")
            try:
                return {k: check_item(v, where) for k, v in value.items()}
            except ProtocolError:
                for k, v in value.items():
                    check_item(v, f"{where}.{k}")
                raise
        return check_dict
    if dataclasses.is_dataclass(tp):
        def check_record(value, where):
            if not isinstance(value, dict):
                raise ProtocolError(f"{where}: expected an object")
            return from_fields(tp, value, {}, where)
        return check_record
    if tp is float:
        def check_number(value, where):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ProtocolError(f"{where}: expected a number, got {type(value).__name__}")
            return float(value)
        return check_number
    if tp in (str, int, bool):
        def check_plain(value, where):
            if type(value) is not tp:
                raise ProtocolError(f"{where}: expected {tp.__name__}, got {type(value).__name__}")
            return value
        return check_plain
    raise TypeError(f"unsupported annotation {tp!r}")  # our bug, not the child's


def _array(value, where: str) -> np.ndarray:
    if not isinstance(value, np.ndarray) or value.dtype != np.float64:
        raise ProtocolError(f"{where}: expected a float64 array")
    return value


@dataclass(frozen=True)
class _Field:
    """How one field of a message travels and is checked: `kind` is "array", "arrays" (a dict of arrays whose
    names are prefixed with the field's), or "json" (checked by `check`)."""
    name: str
    kind: str
    check: Any
    required: bool  # a frame without it is refused (no default; for an array, also not annotated `| None`)


@functools.lru_cache(maxsize=None)
def _plan(cls) -> tuple[_Field, ...]:
    hints = _hints(cls)
    plan = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp = hints[f.name]
        if _is_array_type(tp):
            kind = "array" if (_optional(tp) or tp) is np.ndarray else "arrays"
            plan.append(_Field(f.name, kind, None, _optional(tp) is None and f.default is dataclasses.MISSING))
        else:
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            plan.append(_Field(f.name, "json", _checker(tp), required))
    return tuple(plan)


def from_fields(cls, header: dict, arrays: dict, where: str):
    """An instance of the dataclass `cls` from a frame item's header fields and arrays, each field checked against
    its annotation; `where` names the item in the error ("reply 2 (Output)")."""
    values = {}
    for f in _plan(cls):
        if f.kind == "array":
            if f.name in arrays:
                values[f.name] = _array(arrays[f.name], f"{where}.{f.name}")
            elif f.required:
                raise ProtocolError(f"{where}: array {f.name!r} missing")
        elif f.kind == "arrays":
            prefix = f.name + "."
            values[f.name] = {k[len(prefix):]: _array(v, f"{where}.{k}") for k, v in arrays.items()
                              if k.startswith(prefix)}
        elif f.name in header:
            values[f.name] = f.check(header[f.name], f"{where}.{f.name}")
        elif f.required:
            raise ProtocolError(f"{where}: field {f.name!r} missing")
    return cls(**values)


def to_fields(msg) -> tuple[dict, dict[str, np.ndarray]]:
    """A message as (JSON header fields, raw arrays by name), the way `from_fields` reads it back."""
    header, arrays = {}, {}
    for f in _plan(type(msg)):
        value = getattr(msg, f.name)
        if f.kind == "arrays":
            if isinstance(value, dict):
                arrays.update({f"{f.name}.{k}": v for k, v in value.items()})
        elif f.kind == "array":
            if value is not None:
                arrays[f.name] = value
        else:
            header[f.name] = _plain(value)
    return header, arrays


_SCALARS = (str, int, float, bool, type(None))


@functools.lru_cache(maxsize=None)
def _field_names(cls: type) -> tuple[str, ...] | None:
    """The field names of a dataclass type, in order (None for any other type), read once per type: `_plain` ran
    dataclasses.is_dataclass and dataclasses.fields on every nested record of every message (issue 27: a module's
    description, `Built`, holds a record per parameter, and was made plain twice per build)."""
    return tuple(f.name for f in dataclasses.fields(cls)) if dataclasses.is_dataclass(cls) else None


def _plain(value):
    if type(value) in _SCALARS:
        return value
    names = _field_names(type(value))
    if names is not None:  # a record
        return {name: _plain(getattr(value, name)) for name in names}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value):  # a dataclass type itself (never sent; kept as it was)
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value
