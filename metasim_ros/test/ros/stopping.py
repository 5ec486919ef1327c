# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Stopping a node as a user does (Ctrl-C) and checking what it leaves behind: its exit
code and output, its shared memory, its place in the graph, interrupted snapshot writes."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import rclpy
from rclpy.context import Context
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from metasim_ros.core.atomic import TEMP_NAME
from shared_memory import shm_segments

#: The nodes a sim_node process puts in the graph (FastServices adds the others: the fast
#: services' and ~/step's).
NODE_NAMES = {"sim_node", "sim_node_states", "sim_node_stepping"}
#: Seconds from the signal to the process's end (README: Ctrl-C stops the node within 2 s).
STOP_WITHIN = 2.0
#: Fast DDS drops a participant that left without a word only when its lease ends (5 s
#: with the node's profile, fastdds_profile.xml); one that says goodbye at once.
LEFT_WITHIN = 5.0


def shm_now() -> set[Path]:
    """What /dev/shm holds now: taken before a node starts, so what it adds is known."""
    shm = Path("/dev/shm")
    return set(shm.iterdir()) if shm.is_dir() else set()


def temp_files(folder: Path) -> list[Path]:
    """Temporary files of atomic writes (core.atomic) anywhere under `folder`."""
    return [p for p in folder.rglob("*") if TEMP_NAME.fullmatch(p.name)]


class StopCheck:
    """Watches a serving node, then stops it as a user does and checks the stop promised:
    the process ends within STOP_WITHIN with exit code 0, says so in one line and prints
    no traceback, leaves the graph at once (both of its nodes), and leaves no shared-memory
    segment of its own and no temporary file in `snapshot_dir` (or a folder given to
    `watch`). Made before the node is put in the state under test, so the signal follows
    it at once. `close` when done."""

    def __init__(self, node, client, shm_before: set[Path], snapshot_dir: Path | None = None):
        self.node, self.client = node, client
        self._shm_before = shm_before
        self._folders = [snapshot_dir] if snapshot_dir is not None else []
        # The graph as a peer of this node alone sees it: a participant of its own. The
        # session's long-lived client once kept a stopped node listed for over 30 s with
        # none of its endpoints (rmw_dds_common's graph cache re-adds a participant's
        # nodes when an update about them is taken after its removal), and so failed
        # the stops after it too.
        self._context = Context()
        rclpy.init(context=self._context, signal_handler_options=SignalHandlerOptions.NO)
        self._peer = Node("metasim_stop_peer", context=self._context)
        client.spin_until(lambda: NODE_NAMES <= self._seen(), 20.0, "the node's names in the graph")
        client.spin_until(  # its one line at start (README), written as it serves
            lambda: "simulating" in node.output_so_far(), 20.0, "the node's start-up line"
        )

    def watch(self, folder: Path) -> None:
        """Check `folder` for temporary files too."""
        self._folders.append(folder)

    def _seen(self) -> set[str]:
        return set(self._peer.get_node_names())

    def __call__(self, sig: int = signal.SIGINT) -> float:
        """Send `sig` and check the stop; the seconds from the signal to the end of the
        process. The client spins all the while, so replies the node sends as it stops
        (results of the goals it ends) reach it."""
        node, client = self.node, self.client
        own = shm_segments(node.proc.pid) - self._shm_before
        lines_before = len(node.output_so_far().splitlines())
        start = time.monotonic()
        node.proc.send_signal(sig)
        client.spin_until(
            lambda: node.proc.poll() is not None,
            STOP_WITHIN,
            f"sim_node to exit after signal {signal.Signals(sig).name}",
        )
        took = time.monotonic() - start
        node.wait_output(timeout=5.0)
        assert node.proc.returncode == 0, node.output
        assert "Traceback" not in node.output, node.output
        # one line says it stops, and nothing else is said but start-up's own INFO lines
        # (the removal of what killed processes left runs in a thread of its own)
        said = [line for line in node.output.splitlines()[lines_before:] if line.strip()]
        assert sum("shutting down" in line for line in said) == 1, said
        assert all(line.startswith("[INFO]") for line in said), said
        try:
            client.spin_until(
                lambda: not NODE_NAMES & self._seen(), LEFT_WITHIN, "the node to leave the graph"
            )
        except AssertionError as exc:  # a stale name (no endpoint) or a silent participant
            raise AssertionError(
                f"{exc}: the peer sees {sorted(self._seen())}, "
                f"{self._peer.count_publishers('/clock')} /clock publisher(s)"
            ) from None
        self.close()  # the node mapped the peer's segment too: gone with the peer
        assert not [p for p in own if p.exists()], "shared memory left behind"
        for folder in self._folders:
            assert not temp_files(folder), temp_files(folder)
        print(f"stopped {took:.3f} s after {signal.Signals(sig).name}")
        return took

    def close(self) -> None:
        """Remove the peer (once)."""
        if self._context.ok():
            self._peer.destroy_node()
            self._context.try_shutdown()
