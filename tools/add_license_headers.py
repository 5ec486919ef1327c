#!/usr/bin/env python3
# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Put the project's license header at the top of every Python file (idempotent).

Usage: python tools/add_license_headers.py [--check] [ROOT]

Files: the Python files under metasim_ros/, bench/ and tools/ that git tracks or would
track (untracked but not ignored), or, without git, every .py file found there outside
.venv/build/install/log. The header goes first, after a shebang line and a PEP 263 coding
line if the file has them; files that already carry it are left alone. ``--check`` changes
nothing, lists the files without the header and exits 1 if there are any.

HEADER is the one definition of the header: metasim_ros/test/test_lint.py reads it from here.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

#: The license header, exactly as it must appear (one comment line each).
HEADER = "# Copyright 2026 metasim_ros developers\n# SPDX-License-Identifier: Apache-2.0\n"
#: Directories (relative to the repository root) whose Python files carry the header.
DIRS = ("metasim_ros", "bench", "tools")
#: Never searched when walking the tree without git.
SKIP_DIRS = {".venv", "build", "install", "log", "__pycache__", ".git", ".hypothesis"}

_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+")
REPO_ROOT = Path(__file__).resolve().parents[1]


def python_files(root: Path = REPO_ROOT) -> list[Path]:
    """Return the Python files under DIRS of ``root`` that must carry the header, sorted."""
    root = Path(root)
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *DIRS],
            cwd=root,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        files = set()
        for d in DIRS:
            files.update(_walk(root / d))
    else:
        files = {root / name for name in out.decode().split("\0") if name.endswith(".py")}
    return sorted(f for f in files if f.is_file())


def _walk(top: Path) -> list[Path]:
    found = []
    if top.is_dir():
        for entry in top.iterdir():
            if entry.is_dir() and entry.name not in SKIP_DIRS:
                found += _walk(entry)
            elif entry.is_file() and entry.suffix == ".py":
                found.append(entry)
    return found


def _preamble_length(lines: list[str]) -> int:
    """Count the lines that must stay before the header: a shebang, then a coding line."""
    n = 0
    if lines and lines[0].startswith("#!"):
        n = 1
    if len(lines) > n and _CODING.match(lines[n]):
        n += 1
    return n


def has_header(text: str) -> bool:
    """Tell whether ``text`` carries HEADER right after its shebang / coding lines."""
    lines = text.splitlines(keepends=True)
    n = _preamble_length(lines)
    return "".join(lines[n : n + HEADER.count("\n")]) == HEADER


def with_header(text: str) -> str:
    """Return ``text`` with HEADER inserted (unchanged if it already has it)."""
    if has_header(text):
        return text
    lines = text.splitlines(keepends=True)
    n = _preamble_length(lines)
    if n and not lines[n - 1].endswith("\n"):
        lines[n - 1] += "\n"
    return "".join(lines[:n]) + HEADER + "".join(lines[n:])


def main(argv: list[str] | None = None) -> int:
    """Add the header where it is missing (or, with --check, only list those files)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if any file lacks the header"
    )
    parser.add_argument("root", nargs="?", type=Path, default=REPO_ROOT, help="repository root")
    args = parser.parse_args(argv)
    missing = []
    for path in python_files(args.root):
        text = path.read_bytes().decode("utf-8")  # line endings as they are
        if has_header(text):
            continue
        missing.append(path)
        if not args.check:
            path.write_text(with_header(text), encoding="utf-8", newline="")
    verb = "lack" if args.check else "got"
    for path in missing:
        print(f"{verb} the header: {path.relative_to(args.root)}")
    print(f"{len(missing)} file(s) {verb} the license header", file=sys.stderr)
    return 1 if args.check and missing else 0


if __name__ == "__main__":
    sys.exit(main())
