"""Python side of the hardware interfaces, for recording and tests.

* :class:`ArmClient` - a Modbus TCP client that speaks a register map like the
  Go runtime does (one write of velocity + gripper + incremented heartbeat per
  command; reads of observation/status/fault).
* :class:`BridgeProcess` - starts ``python -m sim.bridge`` as a subprocess on
  free ports and waits for its ready line.
* :func:`http_json`, :func:`snapshot` - the harness HTTP API and the camera.
"""

from __future__ import annotations

import ctypes
import io
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pymodbus.client import ModbusTcpClient

from .regmap import RegisterMap, load_map

REPO = Path(__file__).resolve().parent.parent


@dataclass
class ArmState:
    observation: np.ndarray
    position: np.ndarray | None
    gripper_state: float | None
    status: int
    fault: int


class ArmClient:
    def __init__(self, host: str, port: int, regmap: RegisterMap, timeout: float = 5.0):
        self.map = regmap
        self.client = ModbusTcpClient(host, port=port, timeout=timeout, retries=0)
        if not self.client.connect():
            raise ConnectionError(f"cannot connect to Modbus {host}:{port}")
        self.heartbeat = 0
        self.dev = regmap.unit_id
        lo, hi = regmap.span("input")
        self._in_span = (lo, hi)
        # one write covers velocity..heartbeat when they are contiguous
        names = [n for n in ("velocity_command", "gripper_command", "heartbeat") if regmap.has(n)]
        sigs = [regmap.signal(n) for n in names]
        sigs.sort(key=lambda s: s.address)
        self._cmd_sigs = sigs
        self._contiguous = all(a.end == b.address for a, b in zip(sigs, sigs[1:])) and all(
            s.function == "holding" for s in sigs)

    def close(self):
        self.client.close()

    def _check(self, rr, what):
        if rr.isError():
            raise IOError(f"modbus {what}: {rr}")
        return rr

    def write_signal(self, name: str, values) -> None:
        s = self.map.signal(name)
        if s.function == "coil":
            vals = values if hasattr(values, "__len__") else [values]
            self._check(self.client.write_coils(s.address, [bool(v) for v in vals], device_id=self.dev), name)
            return
        self._check(self.client.write_registers(s.address, self.map.encode(s, values), device_id=self.dev), name)

    def read_signal(self, name: str) -> list[float]:
        s = self.map.signal(name)
        if s.function == "input":
            rr = self.client.read_input_registers(s.address, count=s.size, device_id=self.dev)
        elif s.function == "holding":
            rr = self.client.read_holding_registers(s.address, count=s.size, device_id=self.dev)
        elif s.function == "coil":
            rr = self._check(self.client.read_coils(s.address, count=s.size, device_id=self.dev), name)
            return [float(b) for b in rr.bits[: s.size]]
        else:
            rr = self._check(self.client.read_discrete_inputs(s.address, count=s.size, device_id=self.dev), name)
            return [float(b) for b in rr.bits[: s.size]]
        self._check(rr, name)
        return self.map.decode(s, rr.registers)

    def enable(self, on: bool = True) -> None:
        self.write_signal("enable", [1 if on else 0])

    def command(self, action) -> None:
        """One command: velocity (3) + gripper + incremented heartbeat, in one write when contiguous."""
        a = np.clip(np.asarray(action, dtype=np.float64).reshape(-1), -1.0, 1.0)
        self.heartbeat = (self.heartbeat + 1) & 0xFFFF
        vals = {"velocity_command": list(a[:3]), "gripper_command": [a[3]], "heartbeat": [self.heartbeat]}
        if self._contiguous:
            regs: list[int] = []
            for s in self._cmd_sigs:
                regs.extend(self.map.encode(s, vals[s.name][: s.count]))
            self._check(self.client.write_registers(self._cmd_sigs[0].address, regs, device_id=self.dev), "command")
        else:
            for s in self._cmd_sigs:
                self.write_signal(s.name, vals[s.name][: s.count])

    def state(self) -> ArmState:
        lo, hi = self._in_span
        regs: list[int] = []
        addr = lo
        while addr < hi:  # at most 125 registers per read
            n = min(125, hi - addr)
            rr = self._check(self.client.read_input_registers(addr, count=n, device_id=self.dev), "read state")
            regs.extend(rr.registers)
            addr += n

        def get(name):
            if not self.map.has(name) or self.map.signal(name).function != "input":
                return None
            s = self.map.signal(name)
            return self.map.decode(s, regs[s.address - lo:s.end - lo])

        obs = get("observation")
        pos = get("position")
        gs = get("gripper_state")
        return ArmState(np.asarray(obs, dtype=np.float32) if obs is not None else None,
                        np.asarray(pos) if pos is not None else None,
                        gs[0] if gs else None, int(get("status")[0]), int(get("fault")[0]))


def http_json(base: str, path: str, body: dict | None = None, timeout: float = 30.0) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method="GET" if body is None else "POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def snapshot(base: str, timeout: float = 10.0) -> tuple[np.ndarray, dict]:
    from PIL import Image

    with urllib.request.urlopen(base + "/snapshot.jpg", timeout=timeout) as r:
        data = r.read()
        hdr = {k.lower(): v for k, v in r.headers.items()}
    img = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    return img, hdr


class MJPEGReader:
    """Reads an MJPEG stream part by part (persistent connection), like a network camera client."""

    def __init__(self, base: str, path: str = "/stream", timeout: float = 30.0):
        import socket
        from urllib.parse import urlsplit

        u = urlsplit(base)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {u.hostname}\r\n\r\n".encode())
        self.f = self.sock.makefile("rb")
        status = self.f.readline()
        if b" 200 " not in status:
            raise IOError(f"stream: {status!r}")
        hdr = self._headers()
        ctype = hdr.get("content-type", "")
        if not ctype.startswith("multipart/x-mixed-replace") or "boundary=" not in ctype:
            raise IOError(f"stream: content-type {ctype!r}")
        self.boundary = b"--" + ctype.split("boundary=", 1)[1].strip().strip('"').encode()

    def _headers(self) -> dict:
        h = {}
        while True:
            line = self.f.readline()
            if not line:
                raise EOFError("stream closed")
            if line in (b"\r\n", b"\n"):
                return h
            k, _, v = line.decode("latin-1").partition(":")
            h[k.strip().lower()] = v.strip()

    def read_part(self) -> tuple[dict, bytes]:
        """The next part: (headers, JPEG bytes)."""
        line = self.f.readline()
        while line in (b"\r\n", b"\n"):
            line = self.f.readline()
        if not line:
            raise EOFError("stream closed")
        if line.strip() != self.boundary:
            raise IOError(f"stream: expected boundary, got {line[:40]!r}")
        h = self._headers()
        data = self.f.read(int(h["content-length"]))
        return h, data

    def frame_jpeg(self, min_seq: int, step: int) -> tuple[bytes, dict]:
        """Skip parts until the frame of ``step`` with sequence number >= min_seq: its JPEG bytes."""
        while True:
            h, data = self.read_part()
            if int(h.get("x-frame", 0)) >= min_seq and int(h.get("x-step", -1)) == step:
                return data, h

    def frame(self, min_seq: int, step: int) -> tuple[np.ndarray, dict]:
        """frame_jpeg, decoded (libjpeg, through Pillow)."""
        from PIL import Image

        data, h = self.frame_jpeg(min_seq, step)
        return np.asarray(Image.open(io.BytesIO(data)).convert("RGB")), h

    def close(self):
        try:
            self.f.close()
            self.sock.close()
        except OSError:
            pass


def _die_with_parent() -> None:
    """Ask Linux to send this (child) process SIGTERM when its parent dies.

    Runs in the child between fork and exec (Popen's preexec_fn), as the Go
    harness sets Pdeathsig: a client killed without running its cleanup
    (SIGTERM, SIGKILL) leaves no bridge behind rendering on a core. The
    signal comes when the thread that started the bridge exits, so start it
    from a thread that outlives it. A no-op where prctl is not available.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class BridgeProcess:
    """``python -m sim.bridge`` as a subprocess on free loopback ports.

    The bridge ends with this process: close() stops it, and on Linux so
    does this process's death, however it dies.
    """

    def __init__(self, task: str = "button-press", map_path: str | Path | None = None, lockstep: bool = True,
                 rate: float | None = None, camera_size: str | None = "96x96", seed: int = 0, level: str = "0",
                 extra: list[str] | None = None, startup_timeout: float = 120.0, camera_name: str | None = None):
        self.map_path = Path(map_path or REPO / "examples" / "maps" / "metaworld.yaml")
        cmd = [sys.executable, "-m", "sim.bridge", "--task", task, "--map", str(self.map_path),
               "--modbus", "127.0.0.1:0", "--http", "127.0.0.1:0", "--seed", str(seed), "--level", level]
        if lockstep or rate is None:
            cmd.append("--lockstep")
        else:
            cmd += ["--rate", str(rate)]
        if camera_size:
            cmd += ["--camera-size", camera_size]
            if camera_name:
                cmd += ["--camera", camera_name]
        else:
            cmd.append("--no-camera")
        cmd += extra or []
        env = dict(os.environ)
        env.setdefault("MUJOCO_GL", "osmesa")
        self.proc = subprocess.Popen(cmd, cwd=str(REPO), stdout=subprocess.PIPE, stderr=None, env=env, text=True,
                                     preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        t0 = time.time()
        line = ""
        while time.time() - t0 < startup_timeout:
            line = self.proc.stdout.readline()
            if line.strip().startswith("{"):
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"bridge exited with {self.proc.returncode}")
        else:
            self.close()
            raise TimeoutError("bridge did not become ready")
        self.info = json.loads(line)
        host, port = self.info["modbus"].rsplit(":", 1)
        self.modbus = (host, int(port))
        self.http = "http://" + self.info["http"]
        self.map = load_map(self.map_path)

    def arm(self) -> ArmClient:
        return ArmClient(self.modbus[0], self.modbus[1], self.map)

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
