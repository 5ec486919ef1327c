# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The web page's cost and frame rate: the default scene simulated as fast as possible
(real_time_factor 0) with the page on (core/view/web.py), physics steps per second
measured with no browser and with one headless Chromium showing the page, in
alternating windows (the machine is shared: alternation spreads other load over both).
Twice: the scene at rest, and moving (the cube set on a circle MOVES times a second,
so the page has a body to send all the time). Also the frames the page sent per second
and the frames the browser drew per second (WebGL frames: its `clear` calls; on a
machine without a GPU, Chromium draws WebGL on the CPU, on the cores the physics runs
on).

Target: physics with one browser >= 0.9 of without; >= 20 frames/s while moving.
Run with `make bench`, or: python bench/bench_web.py [WINDOW_SECONDS] [ROUNDS]
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "metasim_ros"), str(HERE.parent / "metasim_ros" / "test")]
os.environ.setdefault("MUJOCO_GL", "egl")


import psutil  # noqa: E402

from browser import Browser, find_chromium  # noqa: E402
from metasim_ros.core.sim.access import SimulationAccess  # noqa: E402
from metasim_ros.core.sim.handler import MujocoHandler  # noqa: E402
from metasim_ros.core.view.controls import RunControls  # noqa: E402
from metasim_ros.core.view.web import WebView  # noqa: E402

#: Counts the WebGL frames the page draws (three.js clears once per frame): installed on
#: the contexts' prototypes, so it counts whatever context the page made.
COUNT_DRAWS = """(() => { if (!window.__frames) { window.__frames = 0;
  for (const C of [WebGLRenderingContext, WebGL2RenderingContext]) {
    const clear = C.prototype.clear;
    C.prototype.clear = function (...a) { window.__frames++; return clear.apply(this, a); }; } }
  return window.__frames; })()"""
#: Cube poses set per second while moving (at least the page's 20 frames/s).
MOVES = 25.0


class _Settings:
    snapshot_dir = "/tmp"
    step_limit = 1000
    snapshot_max_bytes = 1 << 30
    snapshot_max_steps = 1000


def cpu_seconds(browser: Browser | None) -> dict[str, float]:
    """CPU seconds so far: this process's physics thread, its other threads (the page:
    its frame and image threads, viser's server), and the browser's processes."""
    physics = next(t.native_id for t in threading.enumerate() if t.name == "physics")
    used = {"physics": 0.0, "page": 0.0, "browser": 0.0}
    for t in psutil.Process().threads():
        used["physics" if t.id == physics else "page"] += t.user_time + t.system_time
    if browser is not None:
        tree = psutil.Process(browser.proc.pid)
        for p in [tree, *tree.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                used["browser"] += sum(p.cpu_times()[:2])
    return used


def steps_per_second(
    sim: SimulationAccess, seconds: float, browser: Browser | None = None
) -> tuple[float, dict[str, float]]:
    """Physics steps per wall second over `seconds`, and each part's share of a core."""
    c0, n0, t0 = cpu_seconds(browser), sim.loop.steps_taken, time.monotonic()
    time.sleep(seconds)
    elapsed, c1 = time.monotonic() - t0, cpu_seconds(browser)
    return (sim.loop.steps_taken - n0) / elapsed, {k: (c1[k] - c0[k]) / elapsed for k in c1}


class Mover:
    """Moves the cube of env 0 along a circle MOVES times a second while `on`."""

    def __init__(self, sim: SimulationAccess) -> None:
        self._sim = sim
        self.on = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        k = 0
        while not self._stop.wait(1.0 / MOVES):
            if not self.on:
                continue
            k += 1
            a = 2 * math.pi * k / (2 * MOVES)  # a turn every 2 s
            pose = {"pos": [0.5 + 0.1 * math.cos(a), 0.1 * math.sin(a), 0.6], "rot": [1, 0, 0, 0]}
            with self._sim.locked() as h:
                h.set_states([{"objects": {"cube": pose}}])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2.0)


def measure(
    sim: SimulationAccess, view: WebView, browser: Browser, window: float, rounds: int, what: str
) -> str:
    """Alternating windows without and with the browser; one line per round, a summary."""
    off, on, sent, drawn = [], [], [], []
    for r in range(rounds):
        browser.open("about:blank")
        browser.wait_for(lambda: view.clients() == 0, 30, "the page to disconnect")
        rate, off_cpu = steps_per_second(sim, window, browser)
        off.append(rate)
        browser.open(view.address)
        browser.wait_for(lambda: "sim time" in browser.text(), 120, "the page")
        f0, d0, t0 = view.frames_sent, browser.evaluate(COUNT_DRAWS), time.monotonic()
        rate, on_cpu = steps_per_second(sim, window, browser)
        elapsed = time.monotonic() - t0
        on.append(rate)
        sent.append((view.frames_sent - f0) / elapsed)
        drawn.append((browser.evaluate(COUNT_DRAWS) - d0) / elapsed)
        print(
            f"{what}, round {r + 1}: {off[-1]:.0f} steps/s without a browser, {on[-1]:.0f} "
            f"with Chromium ({on[-1] / off[-1]:.2f}); page sent {sent[-1]:.1f} frames/s, "
            f"Chromium drew {drawn[-1]:.1f} frames/s; cores used without / with: physics "
            f"{off_cpu['physics']:.2f} / {on_cpu['physics']:.2f}, the page's threads "
            f"{off_cpu['page']:.2f} / {on_cpu['page']:.2f}, Chromium "
            f"{off_cpu['browser']:.2f} / {on_cpu['browser']:.2f}",
            flush=True,
        )
    return (
        f"{what}: physics with one Chromium / without: {sum(on) / sum(off):.2f} (target >= "
        f"0.9; rounds {min(a / b for a, b in zip(on, off)):.2f}-"
        f"{max(a / b for a, b in zip(on, off)):.2f}); frames sent {min(sent):.1f}-"
        f"{max(sent):.1f}/s, drawn {min(drawn):.1f}-{max(drawn):.1f}/s"
    )


def main(window: float = 10.0, rounds: int = 3) -> int:
    chromium = find_chromium()
    if chromium is None:
        print("no Chromium installed (Debian: apt-get install chromium): nothing measured")
        return 0
    sim = SimulationAccess(MujocoHandler(None, num_envs=1), 0.0)
    view = WebView(
        sim,
        RunControls(sim, _Settings(), print),
        host="127.0.0.1",
        port=0,
        groups=lambda: [0, 1, 2],
        frame_prefix="",
        fast_render=True,
        log_error=print,
    )
    sim.loop.start()
    view.start()
    browser = Browser(chromium)
    mover = Mover(sim)
    try:
        time.sleep(2.0)  # warm up
        at_rest = measure(sim, view, browser, window, rounds, "at rest")
        mover.on = True
        moving = measure(sim, view, browser, window, rounds, "moving")
    finally:
        mover.stop()
        browser.close()
        view.stop(2.0)
        sim.loop.stop(2.0)
    print(at_rest)
    print(moving + " (target >= 20 sent)")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main(*(float(a) if i == 0 else int(a) for i, a in enumerate(sys.argv[1:]))))
