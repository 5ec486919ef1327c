# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Episodes without ROS or a node: what one holds (`episode_info`), running it again
headless (`verify_episode`), and closing one whose recording was killed (`recover`).

Each builds a simulation of the model the episode was recorded with from the scene XML
the episode carries (or a scene file given instead, for scenes whose meshes are files
named relative to the scene), and refuses one whose model signature differs.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml
from rosbags.rosbag2 import Reader

from metasim_ros.core.errors import MetasimError, SnapshotError
from metasim_ros.core.paths import os_problem
from metasim_ros.core.recording.bag import BagWriter, TopicSpec
from metasim_ros.core.recording.episode import BAG, JOURNAL, STATES, read_states
from metasim_ros.core.recording.replay import Replay, replay_headless
from metasim_ros.core.recording.stream import read_journal, spawned_record, write_states
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.core.snapshot.format import model_signature


def episode_handler(
    name: str,
    xml: str,
    num_envs: int,
    robots: list[str],
    signature_hash: str,
    scene: str | None = None,
) -> MujocoHandler:
    """A simulation of episode `name`'s model: its scene XML, or `scene` (a file) instead."""
    try:
        h = MujocoHandler(scene or xml, num_envs=num_envs, robots=robots or None)
    except MetasimError as exc:
        first = str(exc).splitlines()[0]
        raise SnapshotError(
            f"episode {name}: its model does not compile here ({first}); "
            "give the scene it was recorded with (--scene)"
        ) from None
    if model_signature(h.model)["hash"] != signature_hash:
        raise SnapshotError(
            f"episode {name} was recorded with another model than "
            f"{scene or 'the scene XML it holds'} (model signatures differ)"
        )
    return h


def verify_episode(folder: Path, scene: str | None = None) -> Replay:
    """Run a closed episode again from its first state, headless, comparing every recorded
    row bit for bit; the replay says how many rows matched and where it diverged."""
    states = read_states(folder)
    h = episode_handler(
        folder.name,
        states.scene_xml,
        len(states.integration),
        states.robots,
        states.signature_hash,
        scene,
    )
    return replay_headless(states, h)


def episode_info(folder: Path) -> dict[str, Any]:
    """Steps, sim duration, rows and changes of the state stream, and per recorded topic its
    type, message count, mean rate over the sim duration and dropped messages."""
    states = read_states(folder)
    info = states.info
    time = states.integration[0][:, 0]
    seconds = float(time[-1] - time[0])
    dropped = info.get("dropped_messages") or {}
    with Reader(folder / BAG) as bag:
        topics = [
            {
                "topic": c.topic,
                "type": c.msgtype,
                "messages": c.msgcount,
                "rate_hz": c.msgcount / seconds if seconds > 0 else 0.0,
                "dropped": int(dropped.get(c.topic, 0)),
            }
            for c in sorted(bag.connections, key=lambda c: c.topic)
        ]
    return {
        "episode": folder.name,
        "steps": states.last_step,
        "sim_seconds": seconds,
        "timestep": states.timestep,
        "envs": len(states.integration),
        "every": states.every,
        "rows": int((states.kinds == 0).sum()),
        "changes": [
            {"step": int(s), "what": w}
            for s, w, k in zip(states.steps, states.what, states.kinds)
            if k != 0
        ],
        "dropped_rows": int(info.get("dropped_rows", 0)),
        "ended": info.get("ended"),
        "recovered": bool(info.get("recovered", False)),
        "topics": topics,
        "bag_bytes": sum(p.stat().st_size for p in (folder / BAG).glob("*.mcap")),
        "states_bytes": (folder / STATES).stat().st_size,
    }


def format_info(info: dict[str, Any]) -> str:
    """`episode_info` as text for a terminal."""
    lines = [
        f"episode {info['episode']}: {info['steps']} step(s), {info['sim_seconds']:.4g} s of "
        f"sim time (timestep {info['timestep']:g} s), {info['envs']} env(s)",
        f"state stream: {info['rows']} row(s) (every {info['every']} step(s)), "
        f"{len(info['changes'])} change(s), {info['dropped_rows']} row(s) dropped; "
        f"{info['states_bytes'] / 1e6:.3g} MB",
    ]
    if info["ended"]:
        lines.append(f"recording ended early: {info['ended']}")
    if info["recovered"]:
        lines.append("closed by `recover` after the recording was interrupted")
    for c in info["changes"]:
        lines.append(f"  change at step {c['step']}: {c['what']}")
    total = sum(t["dropped"] for t in info["topics"])
    lines.append(
        f"bag: {len(info['topics'])} topic(s), {sum(t['messages'] for t in info['topics'])} "
        f"message(s), {total} dropped; {info['bag_bytes'] / 1e6:.3g} MB"
    )
    width = max((len(t["topic"]) for t in info["topics"]), default=0)
    for t in info["topics"]:
        lines.append(
            f"  {t['topic']:<{width}}  {t['messages']:>7} msgs  {t['rate_hz']:>8.2f} Hz  "
            f"{t['dropped']:>5} dropped  {t['type']}"
        )
    return "\n".join(lines)


def recover(folder: Path, scene: str | None = None) -> str:
    """Close an episode whose recording was killed: the bag rewritten as closed files with
    their summaries (every message of its committed chunks), states.h5 from every complete
    checkpoint of the journal; the journal is then removed. Returns one line."""
    journal = folder / JOURNAL
    if not journal.exists():
        if (folder / STATES).exists():
            raise SnapshotError(f"episode {folder.name} is closed: nothing to recover")
        raise SnapshotError(f"{folder} is not an episode: it has neither {JOURNAL} nor {STATES}")
    data = read_journal(journal)
    head = data.header
    h = episode_handler(
        folder.name,
        head["scene_xml"],
        int(head["num_envs"]),
        list(head.get("robots", [])),
        head["signature_hash"],
        scene,
    )
    facts = h.facts()
    facts.spawned = {n: spawned_record(n, e) for n, e in head.get("spawned", {}).items()}
    messages = _recover_bag(folder / BAG)
    last = int(data.steps[-1])
    info = (
        dict(data.end)
        if data.end is not None
        else {
            "steps": last,
            "every": int(head["every"]),
            "dropped_rows": 0,
            "dropped_messages": {},
            "ended": f"the recording was interrupted after step {last}",
        }
    )
    info["recovered"] = True
    try:
        write_states(facts, folder / STATES, data, info)
        journal.unlink()
    except OSError as exc:
        raise SnapshotError(f"cannot write {folder / STATES}: {os_problem(exc)}") from None
    cut = "" if data.complete else " (a cut-off last record left out)"
    return (
        f"recovered episode {folder.name}: {last} step(s), {data.count} checkpoint(s)"
        f"{cut}, {messages} message(s) in the bag"
    )


def _recover_bag(bag: Path) -> int:
    """Rewrite a bag whose writing was cut off as closed MCAP files (through rosbags'
    reader, which reads the committed chunks); swapped in by renames. Returns its messages."""
    meta_path = bag / "metadata.yaml"
    try:
        meta = yaml.safe_load(meta_path.read_text())["rosbag2_bagfile_information"]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise SnapshotError(f"cannot read {meta_path}: {exc}") from None
    declared = {
        t["topic_metadata"]["name"]: t["topic_metadata"] for t in meta["topics_with_message_count"]
    }
    fresh = bag.with_name(f".{bag.name}.recovering")
    old = bag.with_name(f".{bag.name}.interrupted")
    shutil.rmtree(fresh, ignore_errors=True)
    count = 0
    with Reader(bag) as reader:
        conns = list(reader.connections)
        specs = [
            TopicSpec(
                c.topic,
                c.msgtype,
                c.msgdef.data,
                declared.get(c.topic, {}).get("type_description_hash", c.digest),
                declared.get(c.topic, {}).get("offered_qos_profiles") or [],
            )
            for c in conns
        ]
        index = {c.id: i for i, c in enumerate(conns)}
        writer = BagWriter(fresh, specs, stem=bag.name)
        try:
            for c, stamp, raw in reader.messages():
                writer.write(index[c.id], stamp, raw)
                count += 1
            writer.close()
        except BaseException:
            writer.abort()
            shutil.rmtree(fresh, ignore_errors=True)
            raise
    shutil.rmtree(old, ignore_errors=True)
    bag.rename(old)
    fresh.rename(bag)
    shutil.rmtree(old)
    return count
