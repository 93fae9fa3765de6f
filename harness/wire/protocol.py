"""Wire format between the trusted process and the child that runs student code.

A message is a frame: 4-byte big-endian header length, a UTF-8 JSON header, then the raw little-endian bytes of
each array the header declares (`{"arrays": [{"name", "dtype", "shape"}], ...}`).  No pickle anywhere: the trusted
side parses the header strictly (size caps, a dtype whitelist, shapes that add up) so a hostile child can send wrong
numbers but never code.
"""
from __future__ import annotations

import json
import math
import struct

import numpy as np

MAX_HEADER = 1 << 20
MAX_PAYLOAD = 1 << 28
DTYPES = {"f8": np.dtype("<f8"), "b1": np.dtype("?"), "i8": np.dtype("<i8")}


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed frame."""


class FrameTooLarge(ProtocolError):
    """A frame declares more array bytes than the reader allows (`decode`'s `max_payload`): refused from its header,
    before a byte of its arrays is read, so a child padding its replies costs the trusted side nothing."""

    def __init__(self, declared: int, allowed: int):
        super().__init__(f"a frame of {declared} bytes of arrays, where at most {allowed} can be needed")
        self.declared, self.allowed = declared, allowed


def encode(header: dict, arrays: dict[str, np.ndarray] | None = None) -> bytes:
    arrays = arrays or {}
    specs, blobs = [], []
    for name, a in arrays.items():
        a = np.asarray(a)
        code = {"f": "f8", "b": "b1", "i": "i8", "u": "i8"}.get(a.dtype.kind)
        if code is None:
            raise TypeError(f"array {name!r} has unsupported dtype {a.dtype}")
        a = np.ascontiguousarray(a, dtype=DTYPES[code])
        specs.append({"name": name, "dtype": code, "shape": list(a.shape)})
        blobs.append(a.tobytes())
    head = json.dumps({**header, "arrays": specs}, allow_nan=False).encode()
    return struct.pack(">I", len(head)) + head + b"".join(blobs)


def _read_exact(stream, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            raise EOFError("channel closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _read_array(stream, nbytes: int) -> np.ndarray:
    """`nbytes` bytes read straight into the array that keeps them (one copy in memory, not chunks and their join)."""
    out = np.empty(nbytes, dtype=np.uint8)
    view, got = memoryview(out), 0
    while got < nbytes:
        if hasattr(stream, "readinto"):
            n = stream.readinto(view[got:])
        else:
            chunk = stream.read(nbytes - got)
            n = len(chunk)
            view[got:got + n] = chunk
        if not n:
            raise EOFError("channel closed")
        got += n
    return out


def decode(stream, max_header: int = MAX_HEADER,
           max_payload: int = MAX_PAYLOAD) -> tuple[dict, dict[str, np.ndarray]]:
    """Read one frame; raise ProtocolError for anything malformed and EOFError when the channel is closed.
    `max_header`: the frame holds that many MAX_HEADERs' worth of replies (several modules' descriptions).
    `max_payload`: the most array bytes the reader can need (what its requests ask for): a frame declaring more is
    refused (FrameTooLarge) from its header, before any of its arrays is read."""
    (size,) = struct.unpack(">I", _read_exact(stream, 4))
    if size > max_header:
        raise ProtocolError(f"header of {size} bytes exceeds {max_header}")
    try:
        header = json.loads(_read_exact(stream, size).decode("utf-8"))
    except ValueError as e:  # not UTF-8, not JSON, or an integer longer than Python's 4300-digit limit
        raise ProtocolError(f"header is not JSON: {str(e)[:200]}") from None
    except RecursionError:  # a header nested thousands deep: refused, never a crash of the reader
        raise ProtocolError("header nested too deeply") from None
    if not isinstance(header, dict) or not isinstance(header.get("arrays", []), list):
        raise ProtocolError("header is not an object with an 'arrays' list")
    specs, total = [], 0
    for spec in header.pop("arrays", []):
        try:
            name, dtype, shape = spec["name"], DTYPES[spec["dtype"]], tuple(spec["shape"])
            if not isinstance(name, str) or not all(isinstance(s, int) and 0 <= s < 1 << 31 for s in shape):
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise ProtocolError(f"bad array spec {spec!r}") from None
        nbytes = math.prod(shape) * dtype.itemsize  # exact: an int64 product of large sizes would wrap around
        total += nbytes
        if total > MAX_PAYLOAD:
            raise ProtocolError("payload too large")
        specs.append((name, dtype, shape, nbytes))
    if total > max_payload:  # every size is known before any is read
        raise FrameTooLarge(total, max_payload)
    arrays = {}
    for name, dtype, shape, nbytes in specs:
        arrays[name] = _read_array(stream, nbytes).view(dtype).reshape(shape)
    return header, arrays
