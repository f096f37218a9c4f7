"""A minimal safetensors reader and writer (our own), for the checkpoints tokdyn loads.

The format: 8 bytes little-endian u64 N, then N bytes of a JSON header, then the data. The header
maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets into the data
that follows the header) and may hold "__metadata__" (a str -> str map). This writer pads the
header with spaces so that the data starts at a multiple of 8 bytes, and lays the tensors out
contiguously in name order, every value little-endian. Files are written atomically: a temporary
file in the same folder, flushed and fsync'ed, then os.replace'd onto the name.
"""
from __future__ import annotations

import json
import os
import struct
from collections import OrderedDict
from typing import Dict, Mapping, Optional, Tuple

import numpy as np
import torch

# safetensors dtype name -> (torch dtype, numpy dtype of the same bytes, bytes per element)
_DTYPES = {
    "F64": (torch.float64, np.dtype("<f8"), 8),
    "F32": (torch.float32, np.dtype("<f4"), 4),
    "F16": (torch.float16, np.dtype("<f2"), 2),
    "BF16": (torch.bfloat16, np.dtype("<i2"), 2),  # raw bits: numpy has no bfloat16
    "I64": (torch.int64, np.dtype("<i8"), 8),
    "I32": (torch.int32, np.dtype("<i4"), 4),
    "I16": (torch.int16, np.dtype("<i2"), 2),
    "I8": (torch.int8, np.dtype("i1"), 1),
    "U8": (torch.uint8, np.dtype("u1"), 1),
    "BOOL": (torch.bool, np.dtype("?"), 1),
}
_BY_TORCH = {v[0]: k for k, v in _DTYPES.items()}

# Header bound on reading: real headers are a few hundred kB at most.
MAX_HEADER_BYTES = 100 * 1024 * 1024


def _tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().to("cpu").contiguous()
    if t.dtype == torch.bfloat16:
        a = t.view(torch.int16).numpy()
    else:
        a = t.numpy()
    name = _BY_TORCH[t.dtype]
    return np.ascontiguousarray(a, dtype=_DTYPES[name][1]).tobytes()


def atomic_write_bytes(path: "os.PathLike[str] | str", chunks) -> None:
    """Writes the byte strings `chunks` to `path` through a temporary file in the same folder
    (flushed and fsync'ed), then os.replace: a reader sees the old file or the whole new one."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            for c in chunks:
                f.write(c)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def header_bytes(tensors: Mapping[str, torch.Tensor], metadata: Optional[Mapping[str, str]] = None) -> bytes:
    """The JSON header of `tensors` laid out in name order, padded with spaces to a multiple of 8."""
    header: Dict[str, object] = {}
    if metadata is not None:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError("safetensors metadata: expected str keys and str values")
        header["__metadata__"] = dict(metadata)
    off = 0
    for name in sorted(tensors):
        t = tensors[name]
        if name == "__metadata__":
            raise ValueError("safetensors: '__metadata__' is not a tensor name")
        if t.dtype not in _BY_TORCH:
            raise TypeError(f"safetensors: tensor '{name}' has dtype {t.dtype}; expected one of "
                            + ", ".join(str(d[0]) for d in _DTYPES.values()))
        n = t.numel() * _DTYPES[_BY_TORCH[t.dtype]][2]
        header[name] = {"dtype": _BY_TORCH[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    return h + b" " * ((8 - len(h) % 8) % 8)


def write_safetensors(path: "os.PathLike[str] | str", tensors: Mapping[str, torch.Tensor],
                      metadata: Optional[Mapping[str, str]] = None) -> None:
    """Writes `tensors` (name -> tensor, any layout; stored contiguous, little-endian, in name
    order) with `metadata` as "__metadata__", atomically."""
    h = header_bytes(tensors, metadata)

    def chunks():
        yield struct.pack("<Q", len(h))
        yield h
        for name in sorted(tensors):
            yield _tensor_bytes(tensors[name])

    atomic_write_bytes(path, chunks())


def read_safetensors(path: "os.PathLike[str] | str") -> Tuple["OrderedDict[str, torch.Tensor]", Dict[str, str]]:
    """Reads a safetensors file: (name -> tensor in the order of the data, metadata). Every
    structural rule is checked (header bounds, JSON object, dtypes, shapes against offsets,
    offsets contiguous from 0 and covering the data exactly); ValueError naming the file."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        raw = f.read()

    def bad(msg: str) -> ValueError:
        return ValueError(f"{path}: {msg}")

    if len(raw) < 8:
        raise bad("shorter than the 8-byte header length; expected a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > MAX_HEADER_BYTES or 8 + n > len(raw):
        raise bad(f"header length {n} exceeds the file ({len(raw)} bytes) or the {MAX_HEADER_BYTES}-byte bound")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise bad(f"header is not valid UTF-8 JSON ({e})") from None
    if not isinstance(header, dict):
        raise bad("header is not a JSON object")
    meta = header.pop("__metadata__", {}) or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise bad("__metadata__ is not a map of strings")
    data = memoryview(raw)[8 + n:]
    spans = []
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise bad(f"tensor '{name}': expected exactly dtype, shape, data_offsets")
        dt, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if dt not in _DTYPES:
            raise bad(f"tensor '{name}': dtype {dt!r} is not one of {', '.join(_DTYPES)}")
        if not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
            raise bad(f"tensor '{name}': shape {shape!r} is not a list of non-negative integers")
        if (not isinstance(offs, list) or len(offs) != 2 or not all(isinstance(o, int) and not isinstance(o, bool) for o in offs)
                or not 0 <= offs[0] <= offs[1]):
            raise bad(f"tensor '{name}': data_offsets {offs!r} are not [begin, end] with 0 <= begin <= end")
        numel = 1
        for s in shape:
            numel *= s
        if offs[1] - offs[0] != numel * _DTYPES[dt][2]:
            raise bad(f"tensor '{name}': {offs[1] - offs[0]} bytes for shape {shape} of {dt}")
        spans.append((offs[0], offs[1], name))
    spans.sort()
    pos = 0
    for b, e, name in spans:
        if b != pos:
            raise bad(f"tensor '{name}' starts at byte {b}; expected {pos} (tensors overlap or leave a gap)")
        pos = e
    if pos != len(data):
        raise bad(f"the tensors cover {pos} bytes of data; the file holds {len(data)}")
    out: "OrderedDict[str, torch.Tensor]" = OrderedDict()
    for b, e, name in spans:
        info = header[name]
        tdt, ndt, _ = _DTYPES[info["dtype"]]
        a = np.frombuffer(data[b:e], dtype=ndt).reshape(info["shape"]).copy()
        t = torch.from_numpy(a.astype(ndt.newbyteorder("="), copy=False))
        if info["dtype"] == "BF16":
            t = t.view(torch.int16).view(torch.bfloat16)
        out[name] = t
    return out, dict(meta)
