"""Register maps, format 1 (docs/register-map.md), as the bridge reads them.

The same YAML file is read by the Go client (``actuators.LoadMap``); this module
implements the parts of the format the bridge and the Python Modbus client need:
signal layout, 16/32-bit encoding in the map's word order, scale/offset and
limits, and the heartbeat timeout.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

FUNCTIONS = ("holding", "input", "coil", "discrete")
TYPES = {"int16": 1, "uint16": 1, "int32": 2, "uint32": 2, "float32": 2, "bool": 1}
REQUIRED = ("velocity_command", "enable", "heartbeat", "status", "fault")
_BIT_FUNCTIONS = ("coil", "discrete")


class MapError(ValueError):
    """The register map is invalid."""


_DUR_RE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DUR_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: Any) -> float:
    """Parse a Go-style duration ("500ms", "1s", "1m30s") into seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        raise MapError(f"duration {text!r} needs a unit (e.g. 500ms)")
    s = str(text).strip()
    if not s:
        raise MapError("empty duration")
    pos, total = 0, 0.0
    for m in _DUR_RE.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _DUR_UNITS[m.group(2)]
        pos = m.end()
    if pos != len(s):
        raise MapError(f"bad duration {text!r}")
    return total


@dataclass
class Signal:
    name: str
    function: str
    address: int
    type: str = "uint16"
    count: int = 1
    scale: float = 1.0
    offset: float = 0.0
    unit: str = ""
    min: float | None = None
    max: float | None = None
    bit: int | None = None  # boolean view of one bit (0-15) of a uint16 register
    word_order: str | None = None  # per-signal override
    unit_id: int | None = None  # per-signal override

    @property
    def width(self) -> int:
        """Registers per element (bits count 1)."""
        return 1 if self.function in _BIT_FUNCTIONS else TYPES[self.type]

    @property
    def size(self) -> int:
        """Registers (or bits) the whole signal occupies."""
        return self.width * self.count

    @property
    def end(self) -> int:
        return self.address + self.size


@dataclass
class RegisterMap:
    unit_id: int
    word_order: str
    heartbeat_timeout: float
    signals: dict[str, Signal]
    gripper_hold: Any = "last"
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def signal(self, name: str) -> Signal:
        return self.signals[name]

    def has(self, name: str) -> bool:
        return name in self.signals

    def span(self, function: str) -> tuple[int, int]:
        """[first, end) register range used by signals of one function."""
        sigs = [s for s in self.signals.values() if s.function == function]
        if not sigs:
            return (0, 0)
        return (min(s.address for s in sigs), max(s.end for s in sigs))

    # --- encoding -------------------------------------------------------------
    def encode(self, sig: Signal, values) -> list[int]:
        """Engineering values (scalar or sequence of sig.count) -> raw registers."""
        if not isinstance(values, (list, tuple)) and not hasattr(values, "__len__"):
            values = [values]
        values = list(values)
        if len(values) != sig.count:
            raise ValueError(f"{sig.name}: want {sig.count} values, got {len(values)}")
        out: list[int] = []
        order = sig.word_order or self.word_order
        for v in values:
            if sig.type == "bool":
                out.append(1 if v else 0)
                continue
            raw = (float(v) - sig.offset) / sig.scale
            out.extend(encode_raw(sig.type, raw, order))
        return out

    def decode(self, sig: Signal, regs) -> list[float]:
        """Raw registers (sig.size of them) -> engineering values."""
        regs = list(regs)
        if len(regs) != sig.size:
            raise ValueError(f"{sig.name}: want {sig.size} registers, got {len(regs)}")
        w = sig.width
        order = sig.word_order or self.word_order
        if sig.bit is not None:
            return [float((int(r) >> sig.bit) & 1) for r in regs]
        if sig.type == "bool":
            return [float(bool(r)) for r in regs]
        return [
            decode_raw(sig.type, regs[i * w:(i + 1) * w], order) * sig.scale + sig.offset
            for i in range(sig.count)
        ]


def encode_raw(typ: str, raw: float, word_order: str) -> list[int]:
    if typ == "float32":
        b = struct.pack(">f", raw)
    elif typ in ("int16", "uint16", "int32", "uint32"):
        if not math.isfinite(raw):
            raise ValueError(f"non-finite value for {typ}")
        iv = int(round(raw))
        fmt = {"int16": ">h", "uint16": ">H", "int32": ">i", "uint32": ">I"}[typ]
        try:
            b = struct.pack(fmt, iv)
        except struct.error as exc:
            raise ValueError(f"{raw} does not fit {typ}") from exc
    else:
        raise ValueError(f"unknown type {typ}")
    words = [int.from_bytes(b[i:i + 2], "big") for i in range(0, len(b), 2)]
    if len(words) == 2 and word_order == "low_first":
        words.reverse()
    return words


def decode_raw(typ: str, words, word_order: str) -> float:
    words = list(words)
    if len(words) == 2 and word_order == "low_first":
        words = words[::-1]
    b = b"".join(int(w & 0xFFFF).to_bytes(2, "big") for w in words)
    fmt = {"int16": ">h", "uint16": ">H", "int32": ">i", "uint32": ">I", "float32": ">f"}[typ]
    return float(struct.unpack(fmt, b)[0])


_TYPE_RANGE = {
    "int16": (-32768, 32767),
    "uint16": (0, 65535),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "float32": (-3.4028234663852886e38, 3.4028234663852886e38),
}


def _num(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise MapError(f"{what}: want a number, got {v!r}")
    return float(v)


def parse_map(doc: dict, source: str = "") -> RegisterMap:
    if not isinstance(doc, dict):
        raise MapError("register map: top level must be a mapping")
    known = {"format", "unit_id", "word_order", "heartbeat_timeout", "signals", "gripper_hold", "max_read_gap", "extra"}
    unknown = set(doc) - known
    if unknown:
        raise MapError(f"unknown keys {sorted(unknown)} (put other tools' settings under extra:)")
    if doc.get("format") != 1:
        raise MapError(f"register map: format must be 1, got {doc.get('format')!r}")
    unit_id = int(doc.get("unit_id", 1))
    if not 0 <= unit_id <= 255:
        raise MapError("unit_id out of range")
    word_order = doc.get("word_order", "high_first")
    if word_order not in ("high_first", "low_first"):
        raise MapError(f"word_order must be high_first or low_first, got {word_order!r}")
    if "heartbeat_timeout" not in doc:
        raise MapError("heartbeat_timeout is required")
    hb = parse_duration(doc["heartbeat_timeout"])
    if hb <= 0:
        raise MapError("heartbeat_timeout must be positive")
    raw_sigs = doc.get("signals")
    if not isinstance(raw_sigs, dict):
        raise MapError("signals must be a mapping")
    sigs: dict[str, Signal] = {}
    for name, spec in raw_sigs.items():
        if not isinstance(spec, dict):
            raise MapError(f"{name}: want a mapping")
        fn = spec.get("function")
        if fn not in FUNCTIONS:
            raise MapError(f"{name}: function must be one of {FUNCTIONS}, got {fn!r}")
        bad_keys = set(spec) - {"function", "address", "type", "count", "scale", "offset", "unit", "min", "max",
                                "bit", "word_order", "unit_id"}
        if bad_keys:
            raise MapError(f"{name}: unknown keys {sorted(bad_keys)}")
        typ = spec.get("type", "uint16" if fn not in _BIT_FUNCTIONS else "bool")
        if typ not in TYPES or (fn in _BIT_FUNCTIONS) != (typ == "bool"):
            raise MapError(f"{name}: type {typ!r} does not fit function {fn}")
        bit = spec.get("bit")
        if bit is not None and (typ != "uint16" or not isinstance(bit, int) or not 0 <= bit <= 15):
            raise MapError(f"{name}: bit must be 0..15 on a uint16 register")
        sig_order = spec.get("word_order")
        if sig_order is not None and sig_order not in ("high_first", "low_first"):
            raise MapError(f"{name}: bad word_order {sig_order!r}")
        addr = spec.get("address")
        if not isinstance(addr, int) or isinstance(addr, bool) or not 0 <= addr <= 0xFFFF:
            raise MapError(f"{name}: address must be an integer 0..65535")
        count = spec.get("count", 1)
        if not isinstance(count, int) or count < 1:
            raise MapError(f"{name}: count must be a positive integer")
        scale = _num(spec.get("scale", 1.0), f"{name}.scale")
        if scale == 0:
            raise MapError(f"{name}: scale must not be 0")
        offset = _num(spec.get("offset", 0.0), f"{name}.offset")
        lo = spec.get("min")
        hi = spec.get("max")
        lo = None if lo is None else _num(lo, f"{name}.min")
        hi = None if hi is None else _num(hi, f"{name}.max")
        if lo is not None and hi is not None and lo > hi:
            raise MapError(f"{name}: min > max")
        sig = Signal(name, fn, addr, typ, count, scale, offset, str(spec.get("unit", "")), lo, hi,
                     bit, sig_order, spec.get("unit_id"))
        if typ != "bool":
            tlo, thi = _TYPE_RANGE[typ]
            for lim in (lo, hi):
                if lim is None:
                    continue
                raw = (lim - offset) / scale
                if not tlo <= raw <= thi:
                    raise MapError(f"{name}: limit {lim} not representable as {typ} at scale {scale}")
        if sig.end > 0x10000:
            raise MapError(f"{name}: runs past register 65535")
        sigs[name] = sig
    for req in REQUIRED:
        if req not in sigs:
            raise MapError(f"required signal {req!r} missing")
    # overlaps within one register space
    for fn in FUNCTIONS:
        used: dict[int, str] = {}
        for s in sigs.values():
            if s.function != fn:
                continue
            if s.bit is not None:  # bit views may share a register with the word
                continue
            for a in range(s.address, s.end):
                if a in used:
                    raise MapError(f"{s.name} overlaps {used[a]} at {fn} address {a}")
                used[a] = s.name
    extra = {k: v for k, v in doc.items() if k not in known}
    return RegisterMap(unit_id, word_order, hb, sigs, doc.get("gripper_hold", "last"), source, extra)


def load_map(path: str | Path) -> RegisterMap:
    p = Path(path)
    with p.open() as fh:
        doc = yaml.safe_load(fh)
    return parse_map(doc, str(p))
