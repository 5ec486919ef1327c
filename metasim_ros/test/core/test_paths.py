# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Snapshot paths stay inside the snapshot directory, whatever a caller sends."""

from __future__ import annotations

import os

import pytest

from metasim_ros.core.paths import PathRefusedError, resolve_inside


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
