# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What the operating system refuses while saving or loading a snapshot (a symlink loop, a
name too long, a file where a folder is expected, a folder where a file is expected, a
write cut short) is one SnapshotError line naming the problem: no temp file, no folder
the failed save created, and the file that was there stays."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.paths import folders_made, resolve_inside
from metasim_ros.core.snapshot import SnapshotError, load_snapshot, save_snapshot
from subprocess_env import with_pythonpath


@pytest.fixture(scope="module")
def handler():
    return MujocoHandler()


def one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message and len(message) < 1500, message
    return message


def files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_loads_name_the_os_problem(tmp_path, handler):
    (tmp_path / "f.h5").write_bytes(b"x")
    os.symlink("loop.h5", tmp_path / "loop.h5")
    for name, problem in (
        ("f.h5/x.h5", r"Not a directory \(ENOTDIR\)"),
        ("loop.h5", r"Too many levels of symbolic links \(ELOOP\)"),
        ("a" * 300 + ".h5", r"File name too long \(ENAMETOOLONG\)"),
    ):
        with pytest.raises(SnapshotError, match=problem) as exc:
            load_snapshot(handler, tmp_path / name)
        one_line(exc)


def test_save_onto_a_folder_names_it(tmp_path, handler):
    (tmp_path / "folder.h5").mkdir()
    with pytest.raises(SnapshotError, match=r"Is a directory \(EISDIR\)") as exc:
        save_snapshot(handler, tmp_path / "folder.h5")
    one_line(exc)
    assert files(tmp_path) == ["folder.h5"]


def test_a_failed_save_removes_the_folders_it_created(tmp_path, handler):
    """A 250-byte file name passes the 255-byte limit, but its temp file (14 bytes more)
    does not: the save fails after its folders were made, and they go again."""
    (tmp_path / "keep").mkdir()
    target = resolve_inside(tmp_path, "keep/new/deeper/" + "n" * 250)
    with pytest.raises(SnapshotError, match=r"File name too long \(ENAMETOOLONG\)") as exc:
        with folders_made(target.parent):
            save_snapshot(handler, target)
    one_line(exc)
    assert files(tmp_path) == ["keep"]


#: Saves once, then again with files limited to 64 KiB (RLIMIT_FSIZE; SIGXFSZ ignored, so
#: the write fails with EFBIG); prints the error of the second save.
CUT_SHORT = textwrap.dedent(
    """
    import resource, signal, sys
    import numpy as np
    from metasim_ros.core import MujocoHandler
    from metasim_ros.core.snapshot import SnapshotError, capture_state, save_snapshot
    h = MujocoHandler()
    save_snapshot(h, sys.argv[1])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, resource.RLIM_INFINITY))
    try:
        save_snapshot(h, sys.argv[1], trajectory=np.stack([capture_state(h)] * 2000))
    except SnapshotError as exc:
        print(exc)
    """
)


def test_a_write_cut_short_keeps_the_previous_file(tmp_path, handler):
    target = tmp_path / "snap.h5"
    done = subprocess.run(
        [sys.executable, "-c", CUT_SHORT, str(target)],
        env=with_pythonpath(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and f"cannot save snapshot {target}" in lines[0], done.stdout
    assert "(EFBIG)" in lines[0]
    assert files(tmp_path) == ["snap.h5"]  # no temp file left
    assert load_snapshot(handler, target).count == 1  # the first save, whole


#: Saves into a read-only folder, directly and in a new subfolder; prints each error.
READ_ONLY = textwrap.dedent(
    """
    import sys
    from metasim_ros.core import MujocoHandler
    from metasim_ros.core.errors import RequestError
    from metasim_ros.core.paths import folders_made, resolve_inside
    from metasim_ros.core.snapshot import save_snapshot
    h = MujocoHandler()
    for name in ("ro/a.h5", "ro/sub/a.h5"):
        target = resolve_inside(sys.argv[1], name)
        try:
            with folders_made(target.parent):
                save_snapshot(h, target)
        except RequestError as exc:
            print(exc)
    """
)


def test_a_read_only_folder(tmp_path):
    """Root is refused by folder permissions only without the capabilities that override
    them: as root the saves run with those dropped (setpriv)."""
    drop = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as root and no setpriv to drop the override capabilities")
        drop = [
            "setpriv",
            "--bounding-set=-dac_override,-dac_read_search,-fowner",
            "--inh-caps=-all",
        ]
    (tmp_path / "ro").mkdir(mode=0o555)
    done = subprocess.run(
        [*drop, sys.executable, "-c", READ_ONLY, str(tmp_path)],
        env=with_pythonpath(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"cannot save snapshot {tmp_path}/ro/a.h5: Permission denied (EACCES)",
        f"cannot create folder {tmp_path}/ro/sub: Permission denied (EACCES)",
    ]
    assert files(tmp_path) == ["ro"]
