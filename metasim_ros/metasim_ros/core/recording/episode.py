# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""An episode folder and reading its state stream back.

<recordings_dir>/<episode>/
    bag/             rosbag2 folder (metadata.yaml, bag_0.mcap, ...): the topics
    states.h5        the exact state stream (stream.py), written when the recording stops
    states.journal   the state stream while it is recorded (removed once states.h5 is
                     written; left behind by a recording that was killed)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from metasim_ros.core.errors import SnapshotError
from metasim_ros.core.paths import os_problem, resolve_inside
from metasim_ros.core.recording.stream import (
    EPISODE_FORMAT,
    VERSION,
    StreamData,
    read_journal,
)
from metasim_ros.core.snapshot.io import attr_int, attr_text, open_snapshot

BAG, STATES, JOURNAL = "bag", "states.h5", "states.journal"
#: What paths inside the recordings directory are called in messages.
RECORDINGS = "the recordings directory"


def new_episode(root: str | os.PathLike[str], name: str) -> Path:
    """Create the folder of a new episode inside `root`; an existing one is refused."""
    path = resolve_inside(root, name, RECORDINGS)
    if path.exists():
        raise SnapshotError(f"episode {name!r} exists already in {RECORDINGS}: choose a new name")
    try:
        path.mkdir(parents=True)
    except OSError as exc:
        raise SnapshotError(f"cannot create episode folder {path}: {os_problem(exc)}") from None
    return path


def find_episode(root: str | os.PathLike[str], name: str) -> Path:
    """The folder of an existing episode inside `root`."""
    path = resolve_inside(root, name, RECORDINGS)
    if not path.is_dir():
        raise SnapshotError(f"no episode {name!r} in {RECORDINGS}")
    return path


@dataclass
class EpisodeStates:
    """An episode's checkpoints (see stream.py): steps, kinds and what changed, per env the
    integration rows and control documents; `path` is the file a load reads them from."""

    path: Path
    steps: np.ndarray
    kinds: np.ndarray
    what: list[str]
    integration: list[np.ndarray]
    targets: list[np.ndarray]  # per env [T, 2 * targets]: position targets, velocity targets
    remaining: list[np.ndarray]  # per env [T, nbody]: applied wrenches' remaining seconds
    documents: list[list[bytes]]
    every: int
    info: dict[str, Any]
    signature_hash: str
    scene_xml: str
    robots: list[str]  # the models the recording treated as robots
    timestep: float

    @property
    def last_step(self) -> int:
        """The episode's last step."""
        return int(self.steps[-1])

    def checkpoint_at(self, step: int) -> int:
        """The index of the latest checkpoint at or before `step` (a change at `step`
        wins over the row of `step`: it is the later state)."""
        return int(np.searchsorted(self.steps, step, side="right")) - 1


def read_states(folder: Path) -> EpisodeStates:
    """The finished state stream of an episode (states.h5); a recording that was cut off
    (only states.journal) or a folder that is no episode is refused, naming why."""
    path = folder / STATES
    if not path.exists():
        if (folder / JOURNAL).exists():
            raise SnapshotError(
                f"episode {folder.name} was not closed (the recording was interrupted): "
                f"`metasim-snapshot recover {folder}` closes it"
            )
        raise SnapshotError(f"{folder} is not an episode: it has no {STATES}")
    with open_snapshot(path) as f:
        g = f.get("episode")
        if not isinstance(g, h5py.Group) or attr_text(g, "format") != EPISODE_FORMAT:
            raise SnapshotError(f"{path} is not the state stream of an episode")
        if attr_int(g, "version", 0) != VERSION:
            raise SnapshotError(f"{path}: episode version {attr_int(g, 'version', 0)} unknown")
        try:
            steps = np.asarray(g["step"][()], dtype=np.int64)
            kinds = np.asarray(g["kind"][()], dtype=np.uint8)
            changes = json.loads(g["changes"][()].tobytes())
            info = json.loads(attr_text(g, "info") or "{}")
            envs = f["envs"]
            integration, targets, remaining, documents = [], [], [], []
            for e in range(len(envs)):
                eg = envs[f"env_{e}"]
                rows = np.asarray(eg["integration_state"][()], dtype=np.float64)
                integration.append(rows)
                targets.append(
                    np.hstack(
                        [
                            np.asarray(eg[k][()], np.float64)
                            for k in ("dof_pos_target", "dof_vel_target")
                        ]
                    )
                )
                remaining.append(
                    np.asarray(eg["wrench_remaining"][()], np.float64)
                    if "wrench_remaining" in eg
                    else np.zeros((len(rows), int(f.attrs["nbody"])))
                )
                blob = eg["control"][()].tobytes()
                documents.append([blob[a : a + n] for a, n in eg["control_rows"][()]])
            xml = f["model/xml"][()]
            structure = json.loads(attr_text(f["model"], "structure") or "{}")
            robots = [m["name"] for m in structure.get("models", []) if m["kind"] == "robot"]
            timestep = float(f.attrs["timestep"])
        except (KeyError, ValueError, TypeError, OSError) as exc:
            raise SnapshotError(f"{path}: unreadable episode ({exc})") from None
        if len(steps) != len(kinds) or any(len(r) != len(steps) for r in integration):
            raise SnapshotError(f"{path}: its datasets disagree on the number of checkpoints")
        what = [""] * len(steps)
        for i, text in changes:
            what[int(i)] = str(text)
        return EpisodeStates(
            path,
            steps,
            kinds,
            what,
            integration,
            targets,
            remaining,
            documents,
            attr_int(g, "every", 1),
            info,
            attr_text(f, "signature_hash") or "",
            xml.decode() if isinstance(xml, bytes) else str(xml),
            robots,
            timestep,
        )


def read_unfinished(folder: Path) -> StreamData:
    """The journal of an episode whose recording was cut off, up to its last complete
    checkpoint."""
    path = folder / JOURNAL
    if not path.exists():
        raise SnapshotError(f"{folder} has no {JOURNAL}")
    return read_journal(path)
