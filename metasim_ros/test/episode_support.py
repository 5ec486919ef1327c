# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Real episodes for the tests, recorded without ROS through core.recording's Recording
(the class the node's physics loop drives): a position command, an applied wrench and a
std_msgs/String topic whose CDR bytes come from rosbags' own serialiser."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rosbags.typesys import Stores, get_typestore

from metasim_ros.core import MujocoHandler
from metasim_ros.core.control.commands import JointCommand
from metasim_ros.core.recording.bag import TopicSpec
from metasim_ros.core.recording.schemas import definition
from metasim_ros.core.recording.session import Recording
from subprocess_env import PKG, with_pythonpath

#: A second scene (another model) for episodes that are not the default scene's.
ARTICULATED = str(Path(__file__).parent / "core" / "scenes" / "articulated.xml")
TOPIC = "/chatter"
STRING = "std_msgs/msg/String"
_STORE = get_typestore(Stores.LATEST)


def cdr(text: str) -> bytes:
    """A std_msgs/String as CDR bytes (rosbags' serialiser)."""
    return bytes(_STORE.serialize_cdr(_STORE.types[STRING](data=text), STRING))


def chatter() -> TopicSpec:
    """The recorded topic's spec, with its installed definition and type hash."""
    return TopicSpec(TOPIC, STRING, *definition(STRING))


@dataclass
class Recorded:
    """What the recording run saw: per step, env 0's body positions after mj_forward
    (MuJoCo's own kinematics of the state), and the messages sent."""

    steps: int
    xpos: dict[int, np.ndarray] = field(default_factory=dict)
    messages: list[tuple[int, bytes]] = field(default_factory=list)


def record_episode(
    folder: Path, scene: str | None = None, steps: int = 600, every: int = 1, act: bool = True
) -> Recorded:
    """Record `steps` steps into `folder` (new) in batches of 50, one message per batch;
    with `act` (default scene), a command at step 100 and a wrench at step 250."""
    h = MujocoHandler(scene)
    folder.mkdir()
    rec = Recording(folder, h, [chatter()], every)
    out = Recorded(steps)
    for start in range(0, steps, 50):
        if act and start == 100:
            h.command({"panda_joint1": JointCommand(position=0.3)})
        if act and start == 250:
            h.apply_wrench(0, "cube", [0.0, 0.0, 4.0], [0.0, 0.0, 0.0], [0.5, 0.0, 0.45], 0.05)
        rec.advance(h, min(50, steps - start))
        stamp = round(h.sim_time(0) * 1e9)
        data = cdr(f"step {start + 50}")
        rec.message(0, stamp, data)
        out.messages.append((stamp, data))
        out.xpos[rec.step] = h.synced_data(0).xpos.copy()
    rec.finish_under_lock(h)
    summary = rec.close()
    assert summary.closed and summary.error is None, summary.text()
    return out


#: Records in a process of its own until the journal holds step `steps` and the bag a
#: committed chunk (read back by rosbags), then sends itself SIGKILL mid-episode.
_KILLED = textwrap.dedent(
    """
    import os, signal, sys, time
    from pathlib import Path
    from rosbags.rosbag2 import Reader
    from episode_support import chatter, cdr
    from metasim_ros.core import MujocoHandler
    from metasim_ros.core.recording.session import Recording
    from metasim_ros.core.recording.stream import read_journal
    folder, steps = Path(sys.argv[1]), int(sys.argv[2])
    h = MujocoHandler()
    folder.mkdir()
    rec = Recording(folder, h, [chatter()])
    for k in range(steps // 50):
        rec.advance(h, 50)
        rec.message(0, round(h.sim_time(0) * 1e9), cdr(f"step {rec.step}"))
    deadline = time.monotonic() + 20
    def written():
        try:
            with Reader(folder / "bag") as bag:
                n = len(list(bag.messages()))
            return n == steps // 50 and read_journal(folder / "states.journal").steps[-1] == steps
        except Exception:
            return False
    while not written():
        assert time.monotonic() < deadline, "the recording did not reach the disk"
        time.sleep(0.05)
    rec.advance(h, 7)  # queued, maybe written: cut off by the kill
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def record_killed(folder: Path, steps: int = 300) -> None:
    """An episode whose recording process was killed (SIGKILL) after step `steps`."""
    done = subprocess.run(
        [sys.executable, "-c", _KILLED, str(folder), str(steps)],
        env=with_pythonpath(PKG, str(Path(__file__).parent)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
