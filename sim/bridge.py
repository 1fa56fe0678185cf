"""The Meta-World bridge: a simulated arm that looks like hardware.

    python -m sim.bridge --task button-press --map examples/maps/metaworld.yaml \
        --modbus 127.0.0.1:5020 --http 127.0.0.1:8090 [--lockstep | --rate 10] \
        [--camera-size 96x96 | --no-camera] [--watch-camera NAME] [--seed 0] [--level 0] [--auto-reset]
        [--trace FILE]

* Modbus TCP server (pymodbus) serving exactly the register map file.
  A *command* is a write that changes the heartbeat register; each command
  advances the world by one Meta-World step (lockstep: inside the write, so the
  reply comes after the new observation and frame are in place; --rate R: at the
  next tick of an R Hz clock, one step per tick at most, latest command wins).
  No command, no physics: the world stands still, the camera keeps serving the
  last frame.
* Heartbeat watchdog: no heartbeat change for the map's heartbeat_timeout ->
  zero action, enable register forced to 0, fault bit 0x0001. The next fresh
  heartbeat clears the bit; enable stays 0 until written 1 (refused, reading
  back 0, while the fault word is non-zero).
* HTTP: MJPEG at /stream and /snapshot.jpg (X-Timestamp = capture time),
  with --view-size WxH a display view of the same camera at /view (MJPEG,
  rendered only while a client watches, at most --view-fps frames a second),
  with --watch-camera NAME a second camera of the scene at /watch (MJPEG,
  every step: a watch camera the stop reads, docs/safety.md),
  episode control for harnesses (/episode, /episode/reset, /episode/level,
  /tasks, /levels).  See docs/sim.md.

When both servers listen, one JSON line goes to stdout:
{"modbus": "127.0.0.1:5020", "http": "127.0.0.1:8090", ...}.  Port 0 = pick a free port.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
import math
import os
import signal
import sys
import time
from pathlib import Path
from typing import TextIO
from urllib.parse import parse_qs, urlsplit

os.environ.setdefault("MUJOCO_GL", "osmesa")

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402
from pymodbus.constants import ExcCodes  # noqa: E402
from pymodbus.datastore import ModbusServerContext  # noqa: E402
from pymodbus.server import ModbusTcpServer  # noqa: E402

from . import ood  # noqa: E402
from .regmap import RegisterMap, load_map  # noqa: E402
from .world import DEFAULT_CAMERA, TASKS, Fault, World, normalize_task  # noqa: E402

log = logging.getLogger("sim.bridge")

DEFAULT_MAP = Path(__file__).resolve().parent.parent / "examples" / "maps" / "metaworld.yaml"

# status word bits (input register "status")
ST_READY = 0x0001  # an episode is loaded and not truncated: commands move the arm
ST_SUCCESS = 0x0002  # the task succeeded in this episode (sticky until reset)
ST_TRUNCATED = 0x0004  # max episode length reached: commands are ignored until reset
ST_ENABLED = 0x0008  # motion permitted (enable = 1 and no heartbeat fault)
ST_HEARTBEAT = 0x0010  # heartbeat alive (changed within heartbeat_timeout)
ST_LOCKSTEP = 0x0020  # lockstep mode (one step per command, as fast as commands come)
# fault word bits (input register "fault")
F_HEARTBEAT = 0x0001  # heartbeat lapsed: arm stopped, enable dropped; cleared by the next fresh heartbeat
F_INTERNAL = 0x0008  # controller internal: MuJoCo went unstable in this episode (cleared by reset)
F_BAD_COMMAND = 0x0100  # last command had a non-finite value (executed as zero)

_FN_CODES = {
    1: "coil", 5: "coil", 15: "coil",
    2: "discrete",
    3: "holding", 6: "holding", 16: "holding", 22: "holding", 23: "holding",
    4: "input",
}


def parse_hostport(s: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    if ":" in s:
        host, port = s.rsplit(":", 1)
    else:
        host, port = default_host, s
    return host or default_host, int(port)


def parse_size(s: str) -> tuple[int, int]:
    """A camera size, WIDTHxHEIGHT in pixels (96x96), as (width, height).

    Anything else raises argparse.ArgumentTypeError with a one-line message,
    so a command line that takes it as a type reports it as a usage error.
    """
    parts = s.lower().split("x")
    try:
        w, h = (int(x) for x in parts) if len(parts) == 2 else (0, 0)
    except ValueError:
        w = h = 0
    if w <= 0 or h <= 0:
        raise argparse.ArgumentTypeError(f"camera size {s!r}: want WIDTHxHEIGHT in pixels, e.g. 96x96")
    return w, h


def camera_size_arg(s: str) -> str:
    """argparse type for --camera-size: s, checked by parse_size, as WxH."""
    w, h = parse_size(s)
    return f"{w}x{h}"


class _Context(ModbusServerContext):
    """pymodbus datastore hook: every request goes to the bridge."""

    def __init__(self, bridge: "Bridge"):  # noqa: D107 - no super(): we are the datastore
        self.bridge = bridge
        self.old_simulator = True
        self.simdevices = []
        self._devices = {}

    def device_ids(self):
        return [self.bridge.map.unit_id]

    async def async_getValues(self, device_id, func_code, address, count=1):
        return self.bridge.read(func_code, address, count)

    async def async_setValues(self, device_id, func_code, address, values):
        return self.bridge.write(func_code, address, values)


class _Feed:
    """One camera feed served as MJPEG: the newest JPEG with its capture time, sequence
    number and step, and an event that is set (and replaced) when a new frame arrives."""

    def __init__(self, size: tuple[int, int] | None = None, camera: str | None = None):
        self.size = size  # (width, height) rendered; None = the world's camera size
        self.camera = camera  # the scene's camera rendered; None = the world's (the policy's)
        self.frame: bytes | None = None
        self.ts = 0.0
        self.seq = 0
        self.step = 0
        self.event: asyncio.Event | None = None
        self.encode_s = 0.0
        self.rendered_at = 0.0  # time.monotonic() of the last render
        self.clients = 0
        self.pending = False  # a render is scheduled (Bridge._render_later)

    def headers(self) -> dict:
        return {"X-Timestamp": f"{self.ts:.6f}", "X-Frame": str(self.seq), "X-Step": str(self.step)}


class Bridge:
    def __init__(self, world: World, regmap: RegisterMap, lockstep: bool = True, rate: float = 10.0,
                 jpeg_quality: int = 90, auto_reset: bool = False, auto_reset_hold: int = 20,
                 stream_resend: float = 1.0, heartbeat_timeout: float | None = None,
                 view_size: tuple[int, int] | None = None, view_fps: float = 10.0,
                 watch_camera: str | None = None, trace: TextIO | None = None):
        self.world = world
        self.trace = trace  # --trace: one JSON line per world step (_trace_step)
        self.map = regmap
        self.lockstep = lockstep
        self.rate = rate
        self.jpeg_quality = jpeg_quality
        self.auto_reset = auto_reset
        self.auto_reset_hold = auto_reset_hold
        self.stream_resend = stream_resend
        self.hb_timeout = heartbeat_timeout or regmap.heartbeat_timeout
        self.regs: dict[str, list[int]] = {fn: [0] * regmap.span(fn)[1] for fn in ("holding", "input", "coil", "discrete")}
        self.fault = 0
        self.commands = 0
        self.steps_total = 0
        self.ignored_commands = 0
        self.hb_lapses = 0
        hbs = regmap.signal("heartbeat")
        self._last_hb: list[int] = [0] * hbs.size  # the register starts at 0: the first command writes != 0
        self._last_hb_time = 0.0
        self._hb_armed = False
        self._pending = False
        self._grip_hold = 0.0
        self._was_enabled = False
        self._after_done = 0
        self._prev_pos: np.ndarray | None = None
        self.pending_level: str | None = None
        # camera: the policy's feed (/stream) and, with view_size, a display view (/view)
        # of the same camera, rendered only while watched and at most view_fps a second
        self.cam = _Feed()
        self.view = _Feed(view_size) if view_size and world.camera_size else None
        self.view_period = 1.0 / view_fps if view_fps > 0 else 0.0
        # a watch camera (/watch): a second fixed camera of the same scene that the stop reads
        # and the policy does not, rendered every step like the policy's own
        self.watch = _Feed(camera=watch_camera) if watch_camera and world.camera_size else None
        self.stats = {"step_s": 0.0, "render_s": 0.0, "encode_s": 0.0, "tick_s": 0.0, "n": 0}
        self.modbus_server: ModbusTcpServer | None = None
        self.http_server: asyncio.AbstractServer | None = None
        self.modbus_addr = ("", 0)
        self.http_addr = ("", 0)
        self._tasks: list[asyncio.Task] = []

    # ------------------------------------------------------------------ signals
    def _sig_get(self, name: str) -> list[float] | None:
        if not self.map.has(name):
            return None
        s = self.map.signal(name)
        regs = self.regs[s.function][s.address:s.end]
        if s.function in ("coil", "discrete"):
            return [float(v) for v in regs]
        return self.map.decode(s, regs)

    def _sig_set(self, name: str, values) -> None:
        if not self.map.has(name):
            return
        s = self.map.signal(name)
        if s.function in ("coil", "discrete"):
            vals = values if hasattr(values, "__len__") else [values]
            self.regs[s.function][s.address:s.end] = [1 if v else 0 for v in vals]
            return
        vals = list(values) if hasattr(values, "__len__") else [values]
        if s.type != "float32":
            vals = [max(min(v, 2**31 - 1), -(2**31)) for v in vals]
        self.regs[s.function][s.address:s.end] = self.map.encode(s, vals)

    @property
    def enabled(self) -> bool:
        en = self._sig_get("enable")
        return bool(en and en[0] == 1) and not (self.fault & F_HEARTBEAT)

    def status_word(self) -> int:
        w = self.world
        st = 0
        if not w.truncated:
            st |= ST_READY
        if w.success:
            st |= ST_SUCCESS
        if w.truncated:
            st |= ST_TRUNCATED
        if self.enabled:
            st |= ST_ENABLED
        if self._hb_armed:
            st |= ST_HEARTBEAT
        if self.lockstep:
            st |= ST_LOCKSTEP
        return st

    def _publish_status(self) -> None:
        self._sig_set("status", [self.status_word()])
        self._sig_set("fault", [self.fault])

    def _publish_obs(self) -> None:
        obs = self.world.obs
        o32 = obs.astype(np.float32)
        self._sig_set("observation", [float(x) for x in o32[: self.map.signal("observation").count]]
                      if self.map.has("observation") else [])
        if self.map.has("position"):
            n = self.map.signal("position").count
            self._sig_set("position", [float(x) for x in o32[:n]])
        if self.map.has("gripper_state"):
            self._sig_set("gripper_state", [float(o32[3])])
        if self.map.has("velocity"):
            n = self.map.signal("velocity").count
            pos = obs[:3]
            dt = float(self.world.env.dt)
            v = np.zeros(n)
            if self._prev_pos is not None:
                v[: min(3, n)] = ((pos - self._prev_pos) / dt)[: min(3, n)]
            self._prev_pos = pos.copy()
            self._sig_set("velocity", [float(x) for x in v])
        self._publish_status()

    # ------------------------------------------------------------------ modbus
    def read(self, func_code: int, address: int, count: int):
        fn = _FN_CODES.get(func_code)
        if fn is None:
            return ExcCodes.ILLEGAL_FUNCTION
        regs = self.regs[fn]
        if address < 0 or count < 1 or address + count > len(regs):
            return ExcCodes.ILLEGAL_ADDRESS
        if fn in ("coil", "discrete"):
            return [bool(v) for v in regs[address:address + count]]
        return list(regs[address:address + count])

    def write(self, func_code: int, address: int, values):
        fn = _FN_CODES.get(func_code)
        if fn not in ("holding", "coil"):
            return ExcCodes.ILLEGAL_FUNCTION
        regs = self.regs[fn]
        values = list(values)
        if address < 0 or address + len(values) > len(regs):
            return ExcCodes.ILLEGAL_ADDRESS
        now = time.monotonic()
        en_sig = self.map.signal("enable")
        hb_sig = self.map.signal("heartbeat")
        wrote_enable = en_sig.function == fn and address < en_sig.end and address + len(values) > en_sig.address
        if fn == "coil":
            values = [1 if v else 0 for v in values]
        regs[address:address + len(values)] = [int(v) & 0xFFFF for v in values]
        hb = self.regs[hb_sig.function][hb_sig.address:hb_sig.end]
        fresh = hb != self._last_hb
        if fresh and self.fault & F_HEARTBEAT:
            self.fault &= ~F_HEARTBEAT  # a fresh heartbeat clears the lapse; enable stays 0 until written
            log.info("fresh heartbeat: heartbeat fault cleared")
        if wrote_enable:
            en = self._sig_get("enable")
            if en and en[0] == 1:
                if self.fault:
                    self._sig_set("enable", [0])  # refused while faulted: reads back 0
                else:
                    self._last_hb_time = now  # enabling starts a fresh heartbeat period
        if fresh:
            self._last_hb = list(hb)
            self._last_hb_time = now
            self._hb_armed = True
            self.commands += 1
            if self.lockstep:
                self._command()
            else:
                self._pending = True
        self._publish_status()
        return None

    # ------------------------------------------------------------------ stepping
    def _action(self) -> np.ndarray:
        a = np.zeros(4)
        if self.enabled:
            vel = self._sig_get("velocity_command") or [0.0, 0.0, 0.0]
            grip = self._sig_get("gripper_command")
            g = grip[0] if grip else self._grip_hold
            cmd = list(vel[:3]) + [0.0] * (3 - len(vel[:3])) + [g]
            if not all(math.isfinite(x) for x in cmd):
                self.fault |= F_BAD_COMMAND
                cmd = [x if math.isfinite(x) else 0.0 for x in cmd]
            else:
                self.fault &= ~F_BAD_COMMAND
            a[:] = cmd
            for i, name in ((0, "velocity_command"), (3, "gripper_command")):
                if self.map.has(name):
                    s = self.map.signal(name)
                    lo = -1.0 if s.min is None else s.min
                    hi = 1.0 if s.max is None else s.max
                    sl = slice(0, 3) if i == 0 else slice(3, 4)
                    a[sl] = np.clip(a[sl], lo, hi)
            a = np.clip(a, -1.0, 1.0)
            self._grip_hold = float(a[3])
            self._was_enabled = True
        else:
            a[3] = self._grip_hold  # the gripper keeps its last commanded effort; no arm motion
            if self._was_enabled:
                self.world.hold()
                self._was_enabled = False
        return a

    def _trace_step(self, action: np.ndarray) -> None:
        """One line of the --trace file for the step just taken: the bridge's step count, the
        episode's seed and step, the action applied (after enable and clipping) and the world's
        physics (:meth:`World.physics`: hand, controller target, object, contacts)."""
        w = self.world
        ph = w.physics()
        row = {"step": self.steps_total, "seed": w.seed, "episode_step": w.step_count,
               "action": [round(float(x), 4) for x in action],
               **{k: [round(v, 5) for v in ph[k]] for k in ("hand", "target", "object")}, "contacts": ph["contacts"]}
        self.trace.write(json.dumps(row) + "\n")
        self.trace.flush()

    def _command(self) -> None:
        """One control step: the latest command is applied to the world."""
        w = self.world
        if w.truncated:
            self.ignored_commands += 1
            return
        t0 = time.perf_counter()
        a = self._action()
        w.step(a)
        t1 = time.perf_counter()
        if w.unstable:
            self.fault |= F_INTERNAL
        self.steps_total += 1
        if self.trace is not None:
            self._trace_step(a)
        self._publish_obs()
        self._render()
        self.stats["step_s"] += t1 - t0
        if self.cam.frame is not None and self.world.camera_size:
            self.stats["render_s"] += self.world.last_render_s
            self.stats["encode_s"] += self.cam.encode_s
        self.stats["tick_s"] += time.perf_counter() - t0
        self.stats["n"] += 1
        if self.auto_reset and (w.truncated or w.success):
            self._after_done += 1
            if w.truncated or self._after_done >= self.auto_reset_hold:
                self.reset(seed=w.seed + 1)

    def _render(self, force_view: bool = False) -> None:
        """Render and encode the policy's frame; the view's too while a client watches it
        and its period has passed (or force_view: a reset, a new client)."""
        self._render_feed(self.cam)
        if self.watch is not None:
            self._render_later(self.watch)
        v = self.view
        # a quarter period of slack: steps at the cap's rate, with jitter, are all rendered
        if v is not None and (force_view or v.clients > 0 and time.monotonic() - v.rendered_at >= 0.75 * self.view_period):
            self._render_later(v)

    def _render_later(self, feed: _Feed) -> None:
        """Render feed on the event loop's next turn, once the policy's frame and the command's
        reply have gone out (now, without a running loop). The display view is rendered after
        the step that the policy's frame shows: rendered in between, it held that frame and the
        reply back by its render (research/camera/demo-view)."""
        if feed.pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._render_feed(feed)
            return
        feed.pending = True

        def render() -> None:
            feed.pending = False
            self._render_feed(feed)

        loop.call_soon(render)

    def _render_feed(self, feed: _Feed) -> None:
        img = self.world.render(feed.size, camera=feed.camera)
        if img is None:
            return
        t0 = time.perf_counter()
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, format="JPEG", quality=self.jpeg_quality)
        feed.frame = buf.getvalue()
        feed.ts = time.time()
        feed.seq += 1
        feed.step = self.world.step_count
        feed.encode_s = time.perf_counter() - t0
        feed.rendered_at = time.monotonic()
        ev = feed.event
        feed.event = asyncio.Event()
        if ev is not None:
            ev.set()

    def reset(self, task: str | None = None, level: str | None = None, seed: int | None = None,
              fault: Fault | None = None) -> dict:
        if level is None and self.pending_level is not None:
            level = self.pending_level
        self.pending_level = None
        self.world.reset(task=task, level=level, seed=seed, fault=fault)
        self.fault &= ~(F_INTERNAL | F_BAD_COMMAND)
        # The gripper's held effort belongs to the cell, not the controller:
        # Meta-World's reset opens the gripper, so a new episode must not
        # squeeze it with the previous episode's last command (held while
        # enable is 0, i.e. until the controller enables and commands again).
        self._grip_hold = 0.0
        self._after_done = 0
        self._prev_pos = None
        self._pending = False
        self._publish_obs()
        if self.view is not None:
            # made now, between episodes, not on the step after a viewer connects (World.prepare)
            self.world.prepare(self.view.size)
        # the view shows the new scene at once to whoever watches it; with nobody watching it is
        # not rendered (a client that connects gets a fresh render), as on every step
        self._render(force_view=self.view is not None and self.view.clients > 0)
        log.info("reset task=%s level=%s seed=%s", self.world.task, self.world.level, self.world.seed)
        return self.episode_info()

    def episode_info(self) -> dict:
        d = self.world.info()
        n = max(self.stats["n"], 1)
        d.update({
            "mode": "lockstep" if self.lockstep else "realtime",
            "rate": None if self.lockstep else self.rate,
            "status": self.status_word(),
            "fault": self.fault,
            "enabled": self.enabled,
            "commands": self.commands,
            "ignored_commands": self.ignored_commands,
            "heartbeat_lapses": self.hb_lapses,
            "pending_level": self.pending_level,
            "frame_seq": self.cam.seq,
            "tick_ms": 1000 * self.stats["tick_s"] / n,
            "step_ms": 1000 * self.stats["step_s"] / n,
            "render_ms": 1000 * self.stats["render_s"] / n,
            "encode_ms": 1000 * self.stats["encode_s"] / n,
        })
        return d

    # ------------------------------------------------------------------ loops
    async def _watchdog(self) -> None:
        period = min(0.02, self.hb_timeout / 10)
        while True:
            await asyncio.sleep(period)
            self.check_heartbeat(time.monotonic())

    def check_heartbeat(self, now: float) -> bool:
        """The heartbeat watchdog at monotonic time ``now``; True when the heartbeat lapsed now.

        A lapse while enable is 1 is a fault (a controller gone quiet mid-motion): logged as a
        warning. A lapse after the controller wrote enable 0 is how a harness ends an episode on
        purpose (the runtime halts the arm, then stops commanding): logged at info. The register
        effects are the same either way.
        """
        if not (self._hb_armed and now - self._last_hb_time > self.hb_timeout):
            return False
        en = self._sig_get("enable")
        was_enabled = bool(en and en[0] == 1)
        self._hb_armed = False
        self._pending = False
        self.fault |= F_HEARTBEAT
        self.hb_lapses += 1
        self._sig_set("enable", [0])
        self.world.hold()
        self._was_enabled = False
        self._publish_status()
        if was_enabled:
            log.warning("heartbeat lapsed (> %.3f s): arm stopped, enable dropped", self.hb_timeout)
        else:
            log.info("heartbeat lapsed (> %.3f s) after the controller dropped enable: episode ended, arm holds",
                     self.hb_timeout)
        return True

    async def _ticker(self) -> None:
        period = 1.0 / self.rate
        nxt = time.monotonic()
        while True:
            nxt += period
            delay = nxt - time.monotonic()
            if delay < -period:  # fell behind: do not try to catch up
                nxt = time.monotonic()
                delay = 0
            await asyncio.sleep(max(delay, 0))
            if self._pending:
                self._pending = False
                self._command()

    # ------------------------------------------------------------------ http
    async def _handle_http(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 10)
            if not line:
                return
            parts = line.decode("latin-1").split()
            if len(parts) < 2:
                await self._respond(writer, 400, {"error": "bad request"})
                return
            method, target = parts[0].upper(), parts[1]
            headers = {}
            while True:
                h = await asyncio.wait_for(reader.readline(), 10)
                if h in (b"\r\n", b"\n", b""):
                    break
                k, _, v = h.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            body = b""
            n = int(headers.get("content-length", "0") or 0)
            if n:
                body = await asyncio.wait_for(reader.readexactly(n), 10)
            url = urlsplit(target)
            await self._route(method, url.path, parse_qs(url.query), body, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError):
            pass
        except asyncio.CancelledError:
            # shutdown with a client still attached (the MJPEG stream): end the
            # handler normally, or asyncio logs the cancelled task as an error
            pass
        except Exception as exc:  # noqa: BLE001
            log.exception("http handler")
            try:
                await self._respond(writer, 500, {"error": str(exc)})
            except Exception:  # noqa: BLE001
                pass
        finally:
            try:
                writer.close()
                await writer.wait_closed()
            except Exception:  # noqa: BLE001
                pass

    async def _respond(self, writer, code: int, obj=None, body: bytes | None = None,
                       ctype: str = "application/json", extra: dict | None = None) -> None:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
                  500: "Internal Server Error", 503: "Service Unavailable"}.get(code, "OK")
        if body is None:
            body = (json.dumps(obj) + "\n").encode()
        hdr = [f"HTTP/1.1 {code} {reason}", f"Content-Type: {ctype}", f"Content-Length: {len(body)}",
               "Cache-Control: no-cache", "Connection: close"]
        for k, v in (extra or {}).items():
            hdr.append(f"{k}: {v}")
        writer.write(("\r\n".join(hdr) + "\r\n\r\n").encode() + body)
        await writer.drain()

    async def _route(self, method, path, query, body, writer) -> None:
        if path in ("/stream", "/stream.mjpg", "/video") and method == "GET":
            await self._stream(writer, self.cam)
            return
        if path in ("/watch", "/watch.mjpg") and method == "GET":
            if self.watch is None:
                await self._respond(writer, 404, {"error": "no watch camera (start the bridge with --watch-camera NAME and a camera)"})
                return
            await self._stream(writer, self.watch)
            return
        if path in ("/view", "/view.mjpg") and method == "GET":
            if self.view is None:
                await self._respond(writer, 404, {"error": "no view stream (start the bridge with --view-size WxH and a camera)"})
                return
            self.view.clients += 1
            try:
                self._render_feed(self.view)  # the current state, not the one at the last render
                await self._stream(writer, self.view)
            finally:
                self.view.clients -= 1
            return
        if path in ("/snapshot.jpg", "/snapshot") and method == "GET":
            if self.cam.frame is None:
                await self._respond(writer, 503, {"error": "no camera (started with --no-camera?)"})
                return
            await self._respond(writer, 200, body=self.cam.frame, ctype="image/jpeg", extra=self.cam.headers())
            return
        if path == "/episode" and method == "GET":
            await self._respond(writer, 200, self.episode_info())
            return
        if path == "/tasks" and method == "GET":
            await self._respond(writer, 200, {"tasks": [{"task": t, "env": e, "expert": p} for t, (e, p) in TASKS.items()],
                                              "levels": list(ood.LEVELS)})
            return
        if path == "/levels" and method == "GET":
            await self._respond(writer, 200, ood.as_json())
            return
        if path in ("/healthz", "/") and method == "GET":
            await self._respond(writer, 200, {"ok": True, "modbus": f"{self.modbus_addr[0]}:{self.modbus_addr[1]}",
                                              "http": f"{self.http_addr[0]}:{self.http_addr[1]}"})
            return
        if path in ("/episode/reset", "/episode/level"):
            if method != "POST":
                await self._respond(writer, 405, {"error": "POST only"})
                return
            try:
                req = json.loads(body.decode() or "{}")
                if not isinstance(req, dict):
                    raise ValueError("body must be a JSON object")
                if path == "/episode/reset":
                    task = normalize_task(req["task"]) if req.get("task") is not None else None
                    level = ood.normalize_level(req["level"]) if req.get("level") is not None else None
                    seed = int(req["seed"]) if req.get("seed") is not None else None
                    fault = None
                    if req.get("fault"):
                        fault = Fault(str(req["fault"]), int(req.get("fault_step", 0)))
                    info = self.reset(task=task, level=level, seed=seed, fault=fault)
                else:
                    level = ood.normalize_level(req["level"])
                    if req.get("now"):
                        info = self.reset(level=level, seed=self.world.seed + 1)
                    else:
                        self.pending_level = level
                        info = self.episode_info()
            except (ValueError, KeyError, TypeError) as exc:
                await self._respond(writer, 400, {"error": str(exc)})
                return
            await self._respond(writer, 200, info)
            return
        await self._respond(writer, 404, {"error": f"no route {method} {path}"})

    async def _stream(self, writer, feed: _Feed) -> None:
        if feed.frame is None:
            await self._respond(writer, 503, {"error": "no camera (started with --no-camera?)"})
            return
        boundary = "frame"
        writer.write((
            "HTTP/1.1 200 OK\r\n"
            f"Content-Type: multipart/x-mixed-replace; boundary={boundary}\r\n"
            "Cache-Control: no-cache\r\nConnection: close\r\n\r\n").encode())
        sent_seq = -1
        while True:
            if feed.seq == sent_seq:
                ev = feed.event
                if ev is None:
                    ev = feed.event = asyncio.Event()
                try:
                    await asyncio.wait_for(ev.wait(), self.stream_resend)
                except asyncio.TimeoutError:
                    pass  # resend the last frame (same timestamp) to keep the connection alive
            frame, hdrs = feed.frame, feed.headers()
            sent_seq = feed.seq
            part = (f"--{boundary}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(frame)}\r\n"
                    + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n").encode()
            writer.write(part + frame + b"\r\n")
            await writer.drain()

    # ------------------------------------------------------------------ lifecycle
    async def start(self, modbus: tuple[str, int], http: tuple[str, int]) -> None:
        self.cam.event = asyncio.Event()
        if self.view is not None:
            self.view.event = asyncio.Event()
        if self.world.step_count == 0 and self.world.episode == 0:
            self.reset()
        else:
            self._publish_obs()
            self._render(force_view=True)
        self.modbus_server = ModbusTcpServer(_Context(self), address=modbus)
        await self.modbus_server.serve_forever(background=True)
        self.modbus_addr = self.modbus_server.transport.sockets[0].getsockname()[:2]
        self.http_server = await asyncio.start_server(self._handle_http, http[0], http[1])
        self.http_addr = self.http_server.sockets[0].getsockname()[:2]
        self._tasks.append(asyncio.create_task(self._watchdog()))
        if not self.lockstep:
            self._tasks.append(asyncio.create_task(self._ticker()))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        if self.http_server is not None:
            self.http_server.close()
        if self.modbus_server is not None:
            await self.modbus_server.shutdown()

    def ready_line(self) -> dict:
        return {"modbus": f"{self.modbus_addr[0]}:{self.modbus_addr[1]}",
                "http": f"{self.http_addr[0]}:{self.http_addr[1]}",
                "stream": f"http://{self.http_addr[0]}:{self.http_addr[1]}/stream",
                "view": f"http://{self.http_addr[0]}:{self.http_addr[1]}/view" if self.view else None,
                "view_size": list(self.view.size) if self.view else None,
                "watch": f"http://{self.http_addr[0]}:{self.http_addr[1]}/watch" if self.watch else None,
                "watch_camera": self.watch.camera if self.watch else None,
                "task": self.world.task, "level": self.world.level, "seed": self.world.seed,
                "mode": "lockstep" if self.lockstep else "realtime",
                "camera": list(self.world.camera_size) if self.world.camera_size else None,
                "camera_name": self.world.camera_name if self.world.camera_size else None,
                "map": self.map.source, "pid": os.getpid()}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sim.bridge", description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="button-press", help=f"one of {', '.join(TASKS)}")
    p.add_argument("--map", default=str(DEFAULT_MAP), help="register map YAML (docs/register-map.md)")
    p.add_argument("--modbus", default="127.0.0.1:5020", help="host:port of the Modbus TCP server (port 0 = free port)")
    p.add_argument("--http", default="127.0.0.1:8090", help="host:port of the camera/episode HTTP server (port 0 = free port)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--lockstep", action="store_true", help="step inside each command write, as fast as commands come (default)")
    mode.add_argument("--rate", type=float, default=None, help="real-time mode: at most one step per 1/RATE s, latest command wins")
    p.add_argument("--camera-size", default="96x96", type=parse_size, help="WxH of the rendered camera")
    p.add_argument("--camera", default=DEFAULT_CAMERA, help="MuJoCo camera name (corner, corner2, corner3, corner4, topview, behindGripper, gripperPOV)")
    p.add_argument("--no-camera", action="store_true", help="do not render (low-dimensional evaluation)")
    p.add_argument("--view-size", default=None, type=parse_size,
                   help="WxH of a display view of the same camera at /view (default off; /stream is unchanged)")
    p.add_argument("--view-fps", type=float, default=10.0,
                   help="the view's frames per second at most (rendered only while a client watches; 0 = every step)")
    p.add_argument("--watch-camera", default=None,
                   help="a second MuJoCo camera served at /watch every step: a watch camera the stop reads "
                        "(the bundle's watch_camera); the object fault shows in it, the camera faults do not")
    p.add_argument("--render-quality", choices=("fast", "full"), default="fast",
                   help="fast: one light, Sawyer head display not drawn (default); full: Meta-World's three lights")
    p.add_argument("--jpeg-quality", type=int, default=90)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--level", default="0", help="OOD level 0|S|M|L")
    p.add_argument("--max-steps", type=int, default=None, help="episode length limit (default Meta-World's max_path_length, 500)")
    p.add_argument("--heartbeat-timeout", type=float, default=None, help="override the map's heartbeat_timeout (seconds)")
    p.add_argument("--auto-reset", action="store_true", help="demo: start the next episode (seed+1, pending level) 20 steps after success or at truncation")
    p.add_argument("--trace", default=os.environ.get("ENERGYFLOW_SIM_TRACE") or None, metavar="FILE",
                   help="append one JSON line per world step to FILE: the action applied, the hand, its "
                        "controller's target, the object and the contacts (default: $ENERGYFLOW_SIM_TRACE, "
                        "which reaches the bridge through energyflow sim and sim eval)")
    p.add_argument("--log-level", default="WARNING")
    return p


async def _amain(args) -> int:
    regmap = load_map(args.map)
    trace = None
    if args.trace:
        try:
            trace = open(args.trace, "a", encoding="utf-8")
        except OSError as exc:
            raise SystemExit(f"bridge: --trace {args.trace}: {exc.strerror}") from None
    cam = None if args.no_camera else args.camera_size
    world = World(args.task, camera_size=cam, camera_name=args.camera, max_steps=args.max_steps,
                  render_quality=args.render_quality)
    world.reset(level=args.level, seed=args.seed)
    if args.watch_camera is not None:
        if cam is None:
            raise SystemExit("bridge: --watch-camera needs a camera (not --no-camera)")
        if args.watch_camera == args.camera:
            raise SystemExit(f"bridge: --watch-camera {args.watch_camera} is the policy's camera (--camera): name another")
        try:
            world.render(camera=args.watch_camera)
        except ValueError as exc:
            raise SystemExit(f"bridge: --watch-camera: {exc}") from None
    bridge = Bridge(world, regmap, lockstep=args.rate is None, rate=args.rate or 10.0,
                    jpeg_quality=args.jpeg_quality, auto_reset=args.auto_reset,
                    heartbeat_timeout=args.heartbeat_timeout,
                    view_size=args.view_size, view_fps=args.view_fps,
                    watch_camera=args.watch_camera, trace=trace)
    await bridge.start(parse_hostport(args.modbus), parse_hostport(args.http))
    print(json.dumps(bridge.ready_line()), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except NotImplementedError:  # pragma: no cover
            pass
    await stop.wait()
    await bridge.stop()
    world.close()
    if trace is not None:
        trace.close()
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.WARNING),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr)
    logging.getLogger("pymodbus").setLevel(logging.ERROR)
    return asyncio.run(_amain(args))


if __name__ == "__main__":
    sys.exit(main())
