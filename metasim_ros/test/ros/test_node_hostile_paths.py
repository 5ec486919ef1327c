# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Snapshot paths the operating system refuses, sent to the running node as any process on
the ROS domain can; and the temp files saves killed with SIGKILL leave, removed at start."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from metasim_msgs.srv import LoadSnapshot, SaveSnapshot

from metasim_ros.core.atomic import TEMP_NAME
from shared_memory import shm_segments

NODE = "/sim_node"


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_refused_paths_reply_one_line_and_log_no_traceback(
    paused_node, start_node, client, snapshot_dir
):
    os.symlink("loop", snapshot_dir / "loop")
    (snapshot_dir / "f.h5").write_bytes(b"not a folder")
    (snapshot_dir / "folder.h5").mkdir()
    names = {
        "loop/a.h5": "ELOOP",
        "loop": "ELOOP",
        "a" * 4800: "4800 bytes",
        "d/" * 2000 + "x.h5": "limit of 1024 bytes",
        "d/" * 40 + "x.h5": "limit of 32",
        "f.h5/x.h5": "a file is in the way",
        "f.h5/sub/x.h5": "a file is in the way",
        "new/deeper/" + "n" * 250: "ENAMETOOLONG",  # made its folders, then failed
    }
    if os.geteuid() != 0:  # root is not refused by folder permissions
        (snapshot_dir / "ro").mkdir(mode=0o555)
        names["ro/sub/a.h5"] = "EACCES"
    before = tree(snapshot_dir)
    for name, problem in names.items():
        res = client.call(SaveSnapshot, f"{NODE}/save_snapshot", SaveSnapshot.Request(path=name))
        assert not res.success and problem in res.message, (name[:60], res.message)
        assert "\n" not in res.message and "internal error" not in res.message
    for name in (*names, "folder.h5"):
        res = client.call(
            LoadSnapshot, f"{NODE}/load_snapshot", LoadSnapshot.Request(path=name, index=-1)
        )
        assert not res.success and "\n" not in res.message, (name[:60], res.message)
        assert "internal error" not in res.message
    assert tree(snapshot_dir) == before  # no folder a failed save made is left
    res = client.call(SaveSnapshot, f"{NODE}/save_snapshot", SaveSnapshot.Request(path="a/ok.h5"))
    assert res.success, res.message  # still serving
    paused_node.stop()
    assert "Traceback" not in paused_node.output
    assert "internal error" not in paused_node.output


def test_start_removes_temp_files_of_interrupted_saves(
    start_node, client, snapshot_dir, interrupted_save
):
    (snapshot_dir / "run1").mkdir()
    left = interrupted_save(snapshot_dir / "snap.h5") + interrupted_save(snapshot_dir / "run1/a.h5")
    size = sum(p.stat().st_size for p in left)
    for name in ("notes.tmp", ".x.h5", ".snap.h5.tmp"):
        (snapshot_dir / "run1" / name).write_bytes(b"keep")
    kept = [p for p in tree(snapshot_dir) if not TEMP_NAME.fullmatch(Path(p).name)]

    node = start_node({"paused": True, "snapshot_dir": str(snapshot_dir)}).wait_serving(client)
    assert tree(snapshot_dir) == kept
    node.stop()
    found = re.findall(
        r"removed (\d+) temp file\(s\) of interrupted saves \((\d+) bytes\)", node.output
    )
    assert found == [(str(len(left)), str(size))], node.output


def test_start_cleans_shared_memory_of_killed_nodes(alone, snapshot_dir):
    client, start = alone
    before = set(Path("/dev/shm").iterdir())
    killed = start(paused=True, snapshot_dir=str(snapshot_dir))
    segments = shm_segments(killed.proc.pid) - before  # its own
    if not segments:
        pytest.skip("the middleware uses no Fast DDS shared memory here")
    killed.kill()
    assert all(p.exists() for p in segments), "SIGKILL left no segment behind"
    node = start(paused=True, snapshot_dir=str(snapshot_dir))
    client.spin_until(lambda: not any(p.exists() for p in segments), 20, "segments removed")
    node.stop()
