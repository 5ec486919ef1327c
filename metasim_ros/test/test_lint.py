# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Repository hygiene: ruff finds nothing, every Python file carries the license header,
and the license is Apache-2.0 everywhere it is declared.

The ruff settings are in ruff.toml at the repository root; the ruff version is pinned in
requirements.txt. The header is defined once, in tools/add_license_headers.py (which also
adds it: ``python tools/add_license_headers.py``).
"""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEADER_TOOL = ROOT / "tools" / "add_license_headers.py"
RUFF_TIMEOUT = 120.0


@pytest.fixture(scope="module")
def header_tool() -> dict:
    """The globals of tools/add_license_headers.py (HEADER, python_files, with_header, ...)."""
    return runpy.run_path(str(HEADER_TOOL))


def _ruff_version() -> str:
    try:
        out = subprocess.run(
            [sys.executable, "-m", "ruff", "--version"],
            capture_output=True,
            text=True,
            timeout=RUFF_TIMEOUT,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"
    return out.stdout.strip() or out.stderr.strip()


def test_ruff_finds_nothing() -> None:
    pinned = re.search(r"^ruff==(\S+)", (ROOT / "requirements.txt").read_text(), re.M)
    cmd = [
        sys.executable,
        "-m",
        "ruff",
        "check",
        "--no-cache",
        "--output-format",
        "concise",
        "--config",
        str(ROOT / "ruff.toml"),
        str(ROOT),
    ]
    try:
        result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=RUFF_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"ruff check took more than {RUFF_TIMEOUT:g} s: {' '.join(cmd)}")
    if "No module named ruff" in result.stderr:
        pytest.fail(
            f"ruff is not installed for {sys.executable}; it is pinned in "
            "requirements.txt (run tools/bootstrap.sh, or pip install it)"
        )
    if result.returncode != 0:
        pytest.fail(
            f"ruff check failed (exit {result.returncode}; {_ruff_version()}, pinned "
            f"{pinned.group(1) if pinned else '?'}):\n{result.stdout}{result.stderr}",
            pytrace=False,
        )


def test_every_python_file_has_the_license_header(header_tool: dict) -> None:
    header: str = header_tool["HEADER"]
    files = header_tool["python_files"](ROOT)
    assert files, "no Python files found: the file listing is broken"
    assert Path(__file__).resolve() in {f.resolve() for f in files}
    missing = []
    for path in files:
        lines = path.read_bytes().decode("utf-8").splitlines(keepends=True)
        start = 1 if lines and lines[0].startswith("#!") else 0
        if start < len(lines) and re.match(r"^[ \t\f]*#.*?coding[:=]", lines[start]):
            start += 1
        if "".join(lines[start : start + header.count("\n")]) != header:
            missing.append(str(path.relative_to(ROOT)))
    if missing:
        pytest.fail(
            f"{len(missing)} file(s) do not start with the license header (add it with "
            f"`python tools/add_license_headers.py`):\n" + "\n".join(missing),
            pytrace=False,
        )


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", "{h}"),
        ('"""Doc."""\n', '{h}"""Doc."""\n'),
        ("#!/usr/bin/env python3\nx = 1\n", "#!/usr/bin/env python3\n{h}x = 1\n"),
        ("#!/usr/bin/env python3", "#!/usr/bin/env python3\n{h}"),
        ("# -*- coding: utf-8 -*-\nx = 1\n", "# -*- coding: utf-8 -*-\n{h}x = 1\n"),
        ("#!/bin/python\n# coding=utf-8\n", "#!/bin/python\n# coding=utf-8\n{h}"),
    ],
)
def test_header_tool_inserts_once(header_tool: dict, text: str, expected: str) -> None:
    h = header_tool["HEADER"]
    once = header_tool["with_header"](text)
    assert once == expected.format(h=h)
    assert header_tool["has_header"](once)
    assert header_tool["with_header"](once) == once  # idempotent


def test_license_is_apache_2() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text, "LICENSE is not the full Apache-2.0 text"
    for package in ("metasim_msgs", "metasim_ros"):
        xml = (ROOT / package / "package.xml").read_text(encoding="utf-8")
        assert re.findall(r"<license>(.*?)</license>", xml) == ["Apache-2.0"], package
