# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The files of an episode, read back by the real libraries: the bag (rosbags' reader and
mcap's own reader), the journal (cut at every byte of its last record) and the state stream
(every checkpoint restored exactly by the snapshot loader, checked against MuJoCo's own
kinematics of the recorded run)."""

from __future__ import annotations

import signal
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import mujoco
import numpy as np
import pytest
from mcap.reader import make_reader
from mcap.writer import Writer
from rosbags.rosbag2 import Reader

from episode_support import STRING, cdr, chatter, record_episode, record_killed
from metasim_ros.core import MujocoHandler
from metasim_ros.core.errors import SnapshotError
from metasim_ros.core.recording.bag import HEAD, PAGE, BagWriter, CommittedFile, TopicSpec
from metasim_ros.core.recording.episode import JOURNAL, read_states, read_unfinished
from metasim_ros.core.recording.journal import JournalReader, JournalWriter
from metasim_ros.core.recording.schemas import definition
from metasim_ros.core.snapshot import load_snapshot
from subprocess_env import PKG, with_pythonpath


def _read(folder: Path) -> list[tuple[str, int, bytes]]:
    with Reader(folder) as bag:
        return [(c.topic, t, bytes(d)) for c, t, d in bag.messages()]


def test_a_closed_bag_is_a_standard_rosbag2_mcap_folder(tmp_path):
    other = TopicSpec("/words", STRING, *definition(STRING))
    bag = BagWriter(tmp_path / "bag", [chatter(), other], reserve=1 << 20)
    sent = []
    for i in range(40):
        data = cdr("x" * i)
        bag.write(i % 2, 1000 * i, data)
        sent.append((["/chatter", "/words"][i % 2], 1000 * i, data))
    bag.close()
    assert _read(tmp_path / "bag") == sent
    with Reader(tmp_path / "bag") as r:
        assert {c.topic: c.msgcount for c in r.connections} == {"/chatter": 20, "/words": 20}
        assert r.duration == 39_000 + 1  # rosbags' duration counts both ends
    path = tmp_path / "bag" / "bag_0.mcap"
    assert path.stat().st_size < 1 << 20  # cut to its end: no reserve left
    with open(path, "rb") as f:  # mcap's own seeking reader: the summary indexes the chunks
        summary = make_reader(f).get_summary()
        assert summary is not None and summary.statistics.message_count == 40
        assert len(summary.chunk_indexes) >= 1


def test_every_commit_is_readable_as_the_file_stands(tmp_path):
    """After each commit the file on disk is what a kill would leave: every message
    committed so far reads back."""
    bag = BagWriter(tmp_path / "bag", [chatter()], reserve=4 << 20)
    sent = []
    for i in range(60):
        data = cdr("y" * ((i * 397) % 5000))
        bag.write(0, i, data)
        bag.commit()
        sent.append(("/chatter", i, data))
        assert _read(tmp_path / "bag") == sent
    bag.abort()
    assert _read(tmp_path / "bag") == sent


def test_commits_ending_just_before_a_page_end_stay_readable(tmp_path):
    """Committed data that ends 1..8 bytes before a page end would put the next switch
    header across two pages: the file must still read back (mcap's own reader) after
    every such commit, and after a message committed behind it."""
    path = tmp_path / "f.mcap"
    stream = CommittedFile(path, 1 << 20)
    writer = Writer(stream)
    writer.start(profile="ros2", library="test")
    schema = writer.register_schema(STRING, "ros2msg", chatter().msgdef.encode())
    channel = writer.register_channel("/chatter", "cdr", schema)
    stream.start()
    for k in range(1, HEAD):
        gap = (PAGE - k) - stream.tell() % PAGE
        gap += PAGE if gap < HEAD else 0
        stream.write(struct.pack("<BQ", 0x80, gap - HEAD) + bytes(gap - HEAD))  # a record
        stream.commit()  # readers skip private opcodes
        assert stream.tell() % PAGE <= PAGE - HEAD
        writer.add_message(channel, log_time=k, data=cdr(str(k)), publish_time=k)
        writer.flush()
        stream.commit()
        with open(path, "rb") as f:
            got = [(m.log_time, m.data) for _, _, m in make_reader(f).iter_messages()]
        assert got == [(i, cdr(str(i))) for i in range(1, k + 1)]
    stream.close()


_KILL_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from episode_support import cdr, chatter
    from metasim_ros.core.recording.bag import BagWriter
    bag = BagWriter(Path(sys.argv[1]), [chatter()], reserve=1 << 20)
    for i in range(5):
        bag.write(0, i, cdr(f"kept {i}"))
    bag.commit()
    for i in range(5, 8):
        bag.write(0, i, cdr(f"lost {i}"))
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_a_killed_writer_leaves_every_committed_message(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", _KILL_WRITER, str(tmp_path / "bag")],
        env=with_pythonpath(PKG, str(Path(__file__).parents[1])),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert _read(tmp_path / "bag") == [("/chatter", i, cdr(f"kept {i}")) for i in range(5)]


def test_a_full_reserve_splits_the_bag_into_files(tmp_path):
    bag = BagWriter(tmp_path / "bag", [chatter()], reserve=256 * 1024)
    sent = [("/chatter", i, cdr(f"{i:05d}" + "z" * 20_000)) for i in range(60)]
    for _, t, d in sent:
        bag.write(0, t, d)
    bag.close()
    files = sorted(p.name for p in (tmp_path / "bag").glob("*.mcap"))
    assert len(files) > 2
    assert _read(tmp_path / "bag") == sent
    with pytest.raises(OSError, match="larger than a bag file's reserve"):
        big = BagWriter(tmp_path / "big", [chatter()], reserve=64 * 1024)
        big.write(0, 0, cdr("w" * 100_000))


def test_a_journal_reads_up_to_its_last_complete_record(tmp_path):
    path = tmp_path / "j"
    w = JournalWriter(path)
    records = [b"first", b"", b"third record" * 10]
    for r in records:
        w.append(r)
    w.close()
    whole = path.read_bytes()
    last = 8 + len(records[-1])
    for cut in range(1, last + 1):  # a kill inside the last record, at every byte
        path.write_bytes(whole[:-cut])
        reader = JournalReader(path)
        assert list(reader.records()) == records[:2]
        assert reader.complete is (cut == last)
    corrupt = bytearray(whole)
    corrupt[-1] ^= 1  # a flipped bit in the last payload fails its checksum
    path.write_bytes(bytes(corrupt))
    reader = JournalReader(path)
    assert list(reader.records()) == records[:2] and not reader.complete
    with pytest.raises(FileExistsError):
        JournalWriter(path)


def test_every_checkpoint_of_the_state_stream_restores_exactly(tmp_path):
    run = record_episode(tmp_path / "ep")
    states = read_states(tmp_path / "ep")
    changes = [i for i, k in enumerate(states.kinds) if k]
    assert [int(states.steps[i]) for i in changes] == [100, 250]
    assert states.what[changes[0]] == "ctrl, position targets"
    h = MujocoHandler()
    model = mujoco.MjModel.from_xml_string(states.scene_xml)  # MuJoCo's kinematics
    data = mujoco.MjData(model)
    for step in (50, 100, 250, 300, 600):
        i = states.checkpoint_at(step)
        report = load_snapshot(h, states.path, index=i)
        assert report.exact, report.summary()
        assert h.capture(0).integration.tobytes() == states.integration[0][i].tobytes()
        mujoco.mj_setState(
            model, data, states.integration[0][i], mujoco.mjtState.mjSTATE_INTEGRATION
        )
        mujoco.mj_forward(model, data)
        if states.kinds[i] == 0:  # a row: the state the run had stepped to
            np.testing.assert_array_equal(data.xpos, run.xpos[step])


def test_a_killed_recording_leaves_its_state_stream_readable(tmp_path):
    record_killed(tmp_path / "ep", steps=300)
    data = read_unfinished(tmp_path / "ep")
    assert data.end is None and data.count >= 301 and data.steps[300] == 300
    with pytest.raises(SnapshotError, match="was not closed.*recover"):
        read_states(tmp_path / "ep")
    whole = (tmp_path / "ep" / JOURNAL).read_bytes()
    (tmp_path / "ep" / JOURNAL).write_bytes(whole[:-100])  # a checkpoint cut short
    cut = read_unfinished(tmp_path / "ep")
    assert not cut.complete and cut.count == data.count - 1
