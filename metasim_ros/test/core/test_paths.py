# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Snapshot paths stay inside the snapshot directory, whatever a caller sends; what the
operating system refuses is one line naming the problem."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from metasim_ros.core.errors import NotFoundError
from metasim_ros.core.paths import (
    FileAccessError,
    PathRefusedError,
    folders_made,
    os_problem,
    resolve_inside,
)
from metasim_ros.core.scene import resources


def test_plain_and_nested_names_resolve_inside(tmp_path):
    assert resolve_inside(tmp_path, "a.h5") == tmp_path.resolve() / "a.h5"
    assert resolve_inside(tmp_path, "demo/run1/a.h5") == tmp_path.resolve() / "demo/run1/a.h5"
    assert resolve_inside(tmp_path, "./x/./a.h5") == tmp_path.resolve() / "x/a.h5"


@pytest.mark.parametrize(
    "name, words",
    [
        ("", "empty"),
        ("   ", "empty"),
        ("../outside.h5", "'..'"),
        ("a/../../outside.h5", "'..'"),
        ("/etc/passwd", "absolute"),
        ("a\x00b.h5", "control"),
        ("line\nbreak.h5", "control"),
        ("bell\x07.h5", "control"),
        (".", "directory itself"),
    ],
)
def test_refused_names_say_why(tmp_path, name, words):
    with pytest.raises(PathRefusedError, match=words):
        resolve_inside(tmp_path, name)


def test_symlinks_leaving_the_directory_are_refused(tmp_path):
    root, outside = tmp_path / "snapshots", tmp_path / "elsewhere"
    root.mkdir(), outside.mkdir()
    (outside / "secret.h5").write_bytes(b"x")
    os.symlink(outside, root / "link_dir")
    os.symlink(outside / "secret.h5", root / "link_file.h5")
    os.symlink(root / "inner", root / "inner_link")  # symlink that stays inside is fine
    for name in ("link_dir/secret.h5", "link_file.h5", "link_dir/new.h5"):
        with pytest.raises(PathRefusedError, match="outside"):
            resolve_inside(root, name)
    assert resolve_inside(root, "inner_link/a.h5") == root.resolve() / "inner" / "a.h5"


# --- what the operating system refuses, and the limits checked before it is asked ---


def one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message and len(message) < 400, message
    return message


@pytest.fixture
def nested() -> Iterator[Path]:
    """A folder holding 2,000 real nested folders `d/d/...`, outside pytest's tmp_path:
    pytest removes that with shutil.rmtree, which recurses once per level and would fail.
    Removed here innermost first."""
    root = Path(tempfile.mkdtemp(prefix="metasim_nested_"))
    made = [root]
    for _ in range(2000):
        made.append(made[-1] / "d")
        os.mkdir(made[-1])
    try:
        yield root
    finally:
        for entry in root.iterdir():
            if entry.is_symlink():
                entry.unlink()
        for d in reversed(made):
            d.rmdir()


def test_symlink_loops_are_refused_naming_the_loop(tmp_path):
    os.symlink("self", tmp_path / "self")
    os.symlink("pong", tmp_path / "ping")
    os.symlink("ping", tmp_path / "pong")
    for name in ("self", "self/a.h5", "ping/x/a.h5"):
        with pytest.raises(PathRefusedError, match=r"symbolic links \(ELOOP\)") as exc:
            resolve_inside(tmp_path, name)
        assert repr(name) in one_line(exc)


def test_length_and_depth_limits_are_checked_before_the_disk(tmp_path):
    with pytest.raises(PathRefusedError, match="4800 bytes .* limit of 1024 bytes") as exc:
        resolve_inside(tmp_path, "a" * 4800)
    assert "aaaa" not in one_line(exc)  # the name is not echoed whole
    with pytest.raises(PathRefusedError, match="4000 bytes .* limit of 1024"):
        resolve_inside(tmp_path, "d/" * 2000)  # 2,000 nested folders
    with pytest.raises(PathRefusedError, match="component 2 has 300 bytes.*limit of 255"):
        resolve_inside(tmp_path, "ok/" + "é" * 150 + "/a.h5")
    with pytest.raises(PathRefusedError, match="33 components deep.*limit of 32"):
        resolve_inside(tmp_path, "d/" * 32 + "a.h5")
    assert resolve_inside(tmp_path, "d/" * 31 + "a.h5") == tmp_path / ("d/" * 31 + "a.h5")
    assert list(tmp_path.iterdir()) == []  # nothing was created


def test_limits_hold_for_the_real_path_behind_a_symlink(nested):
    os.symlink(nested.joinpath(*["d"] * 2000), nested / "deep")
    os.symlink(nested.joinpath(*["d"] * 40), nested / "forty")
    with pytest.raises(PathRefusedError, match="real path .* 4004 bytes .* limit of 1024") as exc:
        resolve_inside(nested, "deep/x.h5")
    one_line(exc)
    with pytest.raises(PathRefusedError, match="real path .* 41 components deep.*limit of 32"):
        resolve_inside(nested, "forty/x.h5")


def test_a_file_where_a_folder_is_expected(tmp_path):
    (tmp_path / "f.h5").write_bytes(b"x")
    for name in ("f.h5/x.h5", "f.h5/sub/x.h5"):
        target = resolve_inside(tmp_path, name)
        with pytest.raises(FileAccessError, match="f.h5: a file is in the way") as exc:
            with folders_made(target.parent):
                pytest.fail("the block must not run")
        assert "cannot create folder" in one_line(exc)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.h5"]


def test_folders_made_are_removed_when_the_block_fails(tmp_path):
    (tmp_path / "keep").mkdir()
    target = resolve_inside(tmp_path, "keep/new/deeper/a.h5")
    with pytest.raises(OSError):
        with folders_made(target.parent):
            assert target.parent.is_dir()
            raise OSError("the write failed")
    assert [p.relative_to(tmp_path) for p in tmp_path.rglob("*")] == [Path("keep")]
    with folders_made(target.parent):  # success: they stay
        target.write_bytes(b"x")
    assert target.read_bytes() == b"x"


def test_spawnable_and_world_uris_get_the_same_refusals(tmp_path):
    """resources.resolve (spawnables, worlds) goes through resolve_inside: one line each."""
    os.symlink("loop.xml", tmp_path / "loop.xml")
    (tmp_path / "f.xml").write_text("<mujoco/>")
    for uri, error, words in (
        ("loop.xml", PathRefusedError, "ELOOP"),
        ((tmp_path / "loop.xml").as_uri(), PathRefusedError, "ELOOP"),
        ("a" * 4800 + ".xml", PathRefusedError, "limit of 1024 bytes"),
        ("d/" * 40 + "x.xml", PathRefusedError, "limit of 32"),
        ("f.xml/x.xml", NotFoundError, "no file"),
    ):
        with pytest.raises(error, match=words) as exc:
            resources.resolve(tmp_path, uri, "the spawnables directory")
        one_line(exc)


def test_os_problem_names_the_errno_in_one_line():
    assert os_problem(OSError(errno.ENOSPC, "x")) == "No space left on device (ENOSPC)"
    hdf5 = OSError("Can't write data (file write failed: time = Mon\n, errno = 28, error ...)")
    assert os_problem(hdf5) == "No space left on device (ENOSPC)"
    assert os_problem(OSError("bad (errno = 0,\n flags)")) == "bad (errno = 0, flags)"
