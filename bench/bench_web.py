# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The web page's cost and frame rate: the default scene simulated as fast as possible
(real_time_factor 0) with the page on (core/view/web.py), physics steps per second
measured with no browser and with one headless Chromium showing the page, in
alternating windows (the machine is shared: alternation spreads other load over both).
Twice: the scene at rest, and moving (the cube set on a circle MOVES times a second,
so the page has a body to send all the time). Also the frames the page sent per second
and the frames the browser drew per second (WebGL frames: its `clear` calls).

Each round measures two placements of the processes, both for the windows with and
without the browser, so that each ratio compares like with like:
  same cores: the node (physics, the page's threads) and Chromium on every core, as when
    the browser runs on the node's machine. Without a GPU Chromium draws WebGL on the
    CPU, on the cores the physics runs on: this ratio is mostly the browser's drawing.
  own cores: the node on the first half of the cores, Chromium on the other half, as
    when the browser runs on the user's own machine (the usual case: the node on a robot
    or server, the browser on a laptop): this ratio is only what the page costs the node.
    On a shared machine other processes' work moves onto the node's cores while Chromium
    holds its own, so the ratio per CPU second of the physics thread is printed beside it.

Target: physics with one browser >= 0.9 of without; >= 20 frames/s sent while moving.
Run with `make bench`, or: python bench/bench_web.py [WINDOW_SECONDS] [ROUNDS] [QUERY]
(QUERY: added to the page's address, e.g. fixedDpr=0.5: viser's client then draws half
as many pixels per CSS pixel each way).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "metasim_ros"), str(HERE.parent / "metasim_ros" / "test")]
os.environ.setdefault("MUJOCO_GL", "egl")


import psutil  # noqa: E402

from browser import Browser, find_chromium  # noqa: E402
from metasim_ros.core.sim.access import SimulationAccess  # noqa: E402
from metasim_ros.core.sim.handler import MujocoHandler  # noqa: E402
from metasim_ros.core.view.controls import RunControls  # noqa: E402
from metasim_ros.core.view.web import FRAME_RATE, WebView  # noqa: E402

#: Counts the WebGL frames the page draws (three.js clears once per frame): installed on
#: the contexts' prototypes, so it counts whatever context the page made.
COUNT_DRAWS = """(() => { if (!window.__frames) { window.__frames = 0;
  for (const C of [WebGLRenderingContext, WebGL2RenderingContext]) {
    const clear = C.prototype.clear;
    C.prototype.clear = function (...a) { window.__frames++; return clear.apply(this, a); }; } }
  return window.__frames; })()"""
#: Cube poses set per second while moving: twice the page's FRAME_RATE, so that each of
#: the page's frames has a body that moved to send.
MOVES = 2 * FRAME_RATE
#: The targets: physics with one browser / without, and frames sent while moving.
RATIO_TARGET = 0.9
FRAMES_TARGET = 20.0


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
    """Moves the cube of env 0 along a circle MOVES times a second while `on`, on a fixed
    schedule (a late move does not delay the next), so that the page always has a body
    that moved to send and its frames per second are its own."""

    def __init__(self, sim: SimulationAccess) -> None:
        self._sim = sim
        self.on = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        k, period = 0, 1.0 / MOVES
        due = time.monotonic()
        while not self._stop.wait(max(0.0, due - time.monotonic())):
            due = max(due + period, time.monotonic() - period)
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


@dataclass(frozen=True)
class Placement:
    """Which cores the node's process and Chromium's processes may run on."""

    name: str
    node: frozenset[int]
    browser: frozenset[int]

    def apply(self, browser: Browser) -> None:
        """Every thread of this process and of Chromium's processes onto their cores
        (threads and processes started later inherit their parent's)."""
        tree = psutil.Process(browser.proc.pid)
        for process, cpus in [(psutil.Process(), self.node)] + [
            (p, self.browser) for p in [tree, *tree.children(recursive=True)]
        ]:
            with contextlib.suppress(psutil.NoSuchProcess):
                for t in process.threads():
                    with contextlib.suppress(ProcessLookupError):
                        os.sched_setaffinity(t.id, cpus)


def placements(cores: list[int]) -> list[Placement]:
    """Both on every core of `cores`; the node on the first half, Chromium on the rest."""
    half = max(1, len(cores) // 2)
    every = frozenset(cores)
    return [
        Placement("same cores", every, every),
        Placement("own cores", frozenset(cores[:half]), frozenset(cores[half:]) or every),
    ]


@dataclass
class Figures:
    """One placement's windows: steps/s without and with the browser, the physics
    thread's share of a core in each, the page's threads' share with, frames/s."""

    off: list[float] = field(default_factory=list)
    on: list[float] = field(default_factory=list)
    off_core: list[float] = field(default_factory=list)
    on_core: list[float] = field(default_factory=list)
    page_off_core: list[float] = field(default_factory=list)
    page_core: list[float] = field(default_factory=list)
    sent: list[float] = field(default_factory=list)
    drawn: list[float] = field(default_factory=list)

    def summary(self, what: str, frames_target: bool, apart: bool) -> str:
        """The target's ratio (wall steps/s), and beside it steps per CPU second of the
        physics thread with / without (what the page's threads and the browser cost each
        physics step through the GIL and the caches, whatever share of a core other
        processes on the machine left the physics) and the page's threads' share; and,
        when the browser is `apart` from the node's cores, from these the ratio on a core
        the node has alone: the physics gets what the page's threads leave of it."""
        ratios = [a / b for a, b in zip(self.on, self.off)]
        ratio = sum(self.on) / sum(self.off)
        per_cpu = (sum(self.on) / sum(self.on_core)) / (sum(self.off) / sum(self.off_core))
        verdict = "PASS" if ratio >= RATIO_TARGET else "SHORT"
        line = (
            f"{what}: physics with one Chromium / without: {ratio:.3f} {verdict} (target >= "
            f"{RATIO_TARGET}; rounds {min(ratios):.2f}-{max(ratios):.2f}); per physics CPU "
            f"second {per_cpu:.2f}; the page's threads {min(self.page_core):.2f}-"
            f"{max(self.page_core):.2f} of a core"
        )
        if apart:
            page_on, page_off = (sum(c) / len(c) for c in (self.page_core, self.page_off_core))
            alone = per_cpu * (1.0 - page_on) / (1.0 - page_off)
            verdict = "PASS" if alone >= RATIO_TARGET else "SHORT"
            line += (
                f" (without a browser {page_off:.2f}); on a core of the node's own "
                f"{alone:.3f} {verdict}"
            )
        line += (
            f"; frames sent {min(self.sent):.1f}-{max(self.sent):.1f}/s, drawn "
            f"{min(self.drawn):.1f}-{max(self.drawn):.1f}/s"
        )
        if frames_target:
            sent = "PASS" if min(self.sent) >= FRAMES_TARGET else "SHORT"
            line += f"; frames sent {sent} (target >= {FRAMES_TARGET:.0f}/s in every window)"
        return line


def window(
    sim: SimulationAccess,
    view: WebView,
    browser: Browser,
    place: Placement,
    seconds: float,
    page: str | None,
) -> tuple[float, dict[str, float], float, float]:
    """One window: `page` open in Chromium (None: no page), the processes placed; steps/s,
    cores used, frames sent and drawn per second."""
    if page is None:
        browser.open("about:blank")
        browser.wait_for(lambda: view.clients() == 0, 30, "the page to disconnect")
    else:
        browser.open(page)
        browser.wait_for(lambda: "sim time" in browser.text(), 120, "the page")
    place.apply(browser)  # after the page opened: its renderer may be a new process
    f0, t0 = view.frames_sent, time.monotonic()
    d0 = browser.evaluate(COUNT_DRAWS) if page else 0
    rate, cpu = steps_per_second(sim, seconds, browser)
    elapsed = time.monotonic() - t0
    sent = (view.frames_sent - f0) / elapsed
    drawn = (browser.evaluate(COUNT_DRAWS) - d0) / elapsed if page else 0.0
    return rate, cpu, sent, drawn


def measure(
    sim: SimulationAccess,
    view: WebView,
    browser: Browser,
    seconds: float,
    rounds: int,
    what: str,
    page: str,
    places: list[Placement],
) -> list[str]:
    """Per round and placement, a window without and one with the browser showing `page`;
    one line per pair, a summary per placement."""
    figures = {place: Figures() for place in places}
    for r in range(rounds):
        for place, fig in figures.items():
            off, off_cpu, _, _ = window(sim, view, browser, place, seconds, None)
            on, on_cpu, sent, drawn = window(sim, view, browser, place, seconds, page)
            fig.off.append(off)
            fig.on.append(on)
            fig.off_core.append(off_cpu["physics"])
            fig.on_core.append(on_cpu["physics"])
            fig.page_off_core.append(off_cpu["page"])
            fig.page_core.append(on_cpu["page"])
            fig.sent.append(sent)
            fig.drawn.append(drawn)
            print(
                f"{what}, {place.name}, round {r + 1}: {off:.0f} steps/s without a browser, "
                f"{on:.0f} with Chromium ({on / off:.2f}); page sent {sent:.1f} frames/s, "
                f"Chromium drew {drawn:.1f} frames/s; cores used without / with: physics "
                f"{off_cpu['physics']:.2f} / {on_cpu['physics']:.2f}, the page's threads "
                f"{off_cpu['page']:.2f} / {on_cpu['page']:.2f}, Chromium "
                f"{off_cpu['browser']:.2f} / {on_cpu['browser']:.2f}; load "
                f"{os.getloadavg()[0]:.1f}",
                flush=True,
            )
    return [
        fig.summary(
            f"{what}, {place.name} (node {sorted(place.node)}, Chromium {sorted(place.browser)})",
            what == "moving",
            place.node.isdisjoint(place.browser),
        )
        for place, fig in figures.items()
    ]


def main(seconds: float = 10.0, rounds: int = 3, query: str = "") -> int:
    """query: appended to the page's address (viser's client reads e.g. fixedDpr=0.5, the
    drawing's pixels per CSS pixel)."""
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
    places = placements(sorted(os.sched_getaffinity(0)))  # before any is applied
    try:
        time.sleep(2.0)  # warm up
        page = view.address + (f"?{query}" if query else "")
        lines = measure(sim, view, browser, seconds, rounds, "at rest", page, places)
        mover.on = True
        lines += measure(sim, view, browser, seconds, rounds, "moving", page, places)
    finally:
        mover.stop()
        browser.close()
        view.stop(2.0)
        sim.loop.stop(2.0)
    print("\n".join(lines))
    print(
        "same cores: the browser's software WebGL shares the physics' cores (a browser on "
        "the node's machine without a GPU); own cores: only what the page costs the node "
        "(a browser on another machine)"
    )
    print(f"page {page}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    kinds = (float, int, str)
    sys.exit(main(*(kinds[i](a) for i, a in enumerate(sys.argv[1:4]))))
