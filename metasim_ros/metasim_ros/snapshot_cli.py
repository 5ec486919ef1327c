# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""``metasim-snapshot``: inspect, verify, convert and record HDF5 snapshots and recorded
episodes from a shell.

Failures print one line on stderr and exit 1 (no traceback); usage errors exit 2. ``verify``
prints the whole report (every element not restored included) and exits 3 when the restore left
something out, 4 when it exceeded the tolerance; given an episode folder, it replays the
episode headless and exits 5 at the first divergence from the recording.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from metasim_ros.core import MujocoHandler, StateValidationError
from metasim_ros.core.recording.export import export_robomimic
from metasim_ros.core.recording.offline import episode_info, format_info, recover, verify_episode
from metasim_ros.core.snapshot import (
    SnapshotError,
    convert_snapshot,
    inspect_snapshot,
    load_snapshot,
    save_snapshot,
)
from metasim_ros.core.snapshot.format import FORMAT_VERSION


def _inspect(args: argparse.Namespace) -> int:
    info = inspect_snapshot(args.file)
    print(json.dumps(info, indent=2, default=str))
    if not info["layouts"]:
        raise SnapshotError(
            f"no known snapshot layout in {args.file} (top level: {info['top_level']})"
        )
    return 0


#: ``verify`` exit codes beyond 0 (restored, nothing left out), 1 (error) and 2 (usage).
EXIT_PARTIAL, EXIT_INEXACT, EXIT_DIVERGED = 3, 4, 5


def _verify(args: argparse.Namespace) -> int:
    if Path(args.file).is_dir():
        return _verify_episode(args)
    report = load_snapshot(
        MujocoHandler(args.scene),
        args.file,
        index=args.index,
        group=args.group,
        allow_partial=True,  # restore what fits, so the report measures all of it
        tolerance=args.tolerance,
    )
    print(report.summary())
    if not report.within_tolerance:
        print(
            f"metasim-snapshot: {args.file}: exceeds tolerance {args.tolerance:g}", file=sys.stderr
        )
        return EXIT_INEXACT
    if report.partial:
        print(
            f"metasim-snapshot: {args.file}: partial, {len(report.not_restored)} item(s) "
            "not restored",
            file=sys.stderr,
        )
        return EXIT_PARTIAL
    return 0


def _verify_episode(args: argparse.Namespace) -> int:
    replay = verify_episode(Path(args.file), args.scene)
    print(replay.status())
    if replay.divergence is not None:
        print(f"metasim-snapshot: {args.file}: diverged at {replay.divergence}", file=sys.stderr)
        return EXIT_DIVERGED
    return 0


def _info(args: argparse.Namespace) -> int:
    info = episode_info(Path(args.episode))
    print(json.dumps(info, indent=2) if args.json else format_info(info))
    return 0


def _export(args: argparse.Namespace) -> int:
    names = export_robomimic(
        [Path(e) for e in args.episodes], Path(args.out), args.mask, args.env, args.scene
    )
    print(f"wrote {', '.join(names)} to {args.out} (robomimic)")
    return 0


def _recover(args: argparse.Namespace) -> int:
    print(recover(Path(args.episode), args.scene))
    return 0


def _convert(args: argparse.Namespace) -> int:
    reports = convert_snapshot(
        MujocoHandler(args.scene),
        args.src,
        args.dst,
        group=args.group,
        allow_partial=args.allow_partial,
        tolerance=args.tolerance,
        progress=True,
    )
    worst = max(max(r.max_qpos_error, r.max_qvel_error) for r in reports)
    print(
        f"converted {len(reports)} state(s) from {args.src} via '{reports[0].strategy}' "
        f"to {args.dst} (own format version {FORMAT_VERSION})"
    )
    print(f"max qpos/qvel error over all states: {worst:.3g}")
    for line in reports[0].not_restored:
        print(f"not restored: {line}")
    return 0


def _record(args: argparse.Namespace) -> int:
    if args.steps < 0:
        raise SnapshotError(f"--steps must be >= 0, got {args.steps}")
    handler = MujocoHandler(args.scene)
    states = [handler.capture(0)]  # with the control state: every row restores exactly
    for _ in tqdm(range(args.steps), desc="record", unit="step"):
        handler.step()
        states.append(handler.capture(0))
    save_snapshot(handler, args.out, [0], states)
    print(f"recorded {args.steps} step(s) ({args.steps + 1} states) to {args.out}")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="metasim-snapshot", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    def scene(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--scene", default=None, help="MJCF/URDF scene (default: the embedded default scene)"
        )
        sp.add_argument(
            "--tolerance", type=float, default=1e-6, help="verification tolerance (default 1e-6)"
        )

    sp = sub.add_parser(
        "inspect", help="show the layouts, model signature and counts found in a file"
    )
    sp.add_argument("file")
    sp.set_defaults(run=_inspect)
    sp = sub.add_parser(
        "verify",
        help="restore a file into a fresh simulation and print the report; or replay an "
        "episode folder headless, comparing every recorded state bit for bit",
    )
    sp.add_argument("file")
    sp.add_argument(
        "--index", type=int, default=-1, help="state to restore (negative from the end)"
    )
    sp.add_argument("--group", default="", help="robomimic demo (default: the first)")
    scene(sp)
    sp.set_defaults(run=_verify)
    sp = sub.add_parser(
        "convert", help="rewrite a file of any known layout in the own format (version 3)"
    )
    sp.add_argument("src")
    sp.add_argument("dst")
    sp.add_argument("--group", default="", help="robomimic demo (default: the first)")
    sp.add_argument(
        "--allow-partial",
        action="store_true",
        help="convert even when some joints of the scene are not in the file (listed)",
    )
    scene(sp)
    sp.set_defaults(run=_convert)
    sp = sub.add_parser(
        "info", help="an episode's steps, duration, changes, topics with counts, rates, drops"
    )
    sp.add_argument("episode")
    sp.add_argument("--json", action="store_true", help="print it as JSON")
    sp.set_defaults(run=_info)
    sp = sub.add_parser("export", help="append episodes to a dataset file as demo_0..n")
    sp.add_argument("episodes", nargs="+", metavar="EPISODE")
    sp.add_argument("out", metavar="OUT")
    sp.add_argument("--format", choices=["robomimic"], required=True)
    sp.add_argument("--mask", default="", help="also list the new demos under mask/<MASK>")
    sp.add_argument("--env", type=int, default=0, help="the env exported (default 0)")
    sp.add_argument(
        "--scene", default=None, help="scene file to use instead of the XML the episode holds"
    )
    sp.set_defaults(run=_export)
    sp = sub.add_parser(
        "recover", help="close an episode whose recording was killed (bag and state stream)"
    )
    sp.add_argument("episode")
    sp.add_argument(
        "--scene", default=None, help="scene file to use instead of the XML the episode holds"
    )
    sp.set_defaults(run=_recover)
    sp = sub.add_parser("record", help="run the scene and save every step as a trajectory")
    sp.add_argument("out")
    sp.add_argument("--steps", type=int, required=True)
    scene(sp)
    sp.set_defaults(run=_record)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point (``metasim-snapshot = metasim_ros.snapshot_cli:main``)."""
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print("metasim-snapshot: interrupted", file=sys.stderr)
        return 130
    except (
        Exception
    ) as exc:  # a CLI reports, it does not dump tracebacks (scene parse errors, I/O, ...)
        known = isinstance(exc, (SnapshotError, StateValidationError, OSError))
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(
            f"metasim-snapshot: error: {message if known else f'{type(exc).__name__}: {message}'}",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
