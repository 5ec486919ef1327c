# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""One episode being recorded: the state stream and the bag, written off the physics thread.

The physics thread only copies states (a `mj_getState` per row into a block of rows
kept across batches, `_Block`) and queues the block when it is full, before a change, or
WAKE_SECONDS after its first row (the writer queues one physics left behind, paused); the
topic taps only queue the bytes they received. One writer thread drains the queue into
the journal and the bag, waking every WAKE_SECONDS (or sooner for a change, the end or
WAKE_BYTES waiting), not once per batch. The queue is bounded in bytes: when the disk
falls behind, rows and messages that do not fit are dropped and counted (``status`` says
how many), so physics never waits for the disk. Changes are
never dropped: a replay needs every one. A write error (a full disk) ends the recording:
nothing more is queued, physics goes on, and ``status`` names the error.

As a physics-loop observer (`advance`, called under the simulation lock with the steps
to take), the recording has the handler step in runs that end at every `every`-th step
(`step_sampled`) and copy a row there (a block's rows go to the queue together, before
any change that follows them; the control capture, taken once per write, is shared by
the rows while stepping cannot change it), and at the start of every batch looks
at the handler's count of writes: when anything wrote since the last batch (a command,
set_states, goal, wrench, load, reset), it compares the state with the one captured just
before the first of those writes (the handler's `before_write`) and queues a CHANGE
checkpoint with the state they produced, if it differs. A batch nothing wrote before
costs no capture.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import mujoco
import numpy as np

from metasim_ros.core.control.record import ControlState
from metasim_ros.core.errors import SnapshotError
from metasim_ros.core.paths import os_problem
from metasim_ros.core.recording.bag import BagWriter, TopicSpec
from metasim_ros.core.recording.episode import BAG, JOURNAL, STATES
from metasim_ros.core.recording.stream import (
    CHANGE,
    ROW,
    Checkpoint,
    Rows,
    StreamWriter,
    describe_change,
    read_journal,
    same_state,
    write_states,
)
from metasim_ros.core.scene.builder import INTEGRATION_STATE
from metasim_ros.core.sim.handler import MujocoHandler, PhysicsState

#: Default bound of the queue between the recording's producers and its writer (bytes).
DEFAULT_QUEUE_BYTES = 256 * 1024 * 1024
#: The writer wakes at least this often (seconds), or once this many bytes wait.
WAKE_SECONDS = 0.05
WAKE_BYTES = 4 << 20
#: The physics thread keeps rows in blocks of about this size (queued when full, before a
#: change, or WAKE_SECONDS after their first row): one allocation and one queue entry per
#: block, not per batch.
BLOCK_BYTES = 1 << 20
_END = object()


class _Queue:
    """A FIFO bounded in bytes; items that must not be lost may exceed the bound.

    The writer takes what waits in one go, waking when an item must not wait (a change,
    the end), when WAKE_BYTES wait, or after WAKE_SECONDS: not once per physics batch,
    since every wake-up costs the physics thread a hand-over of the GIL."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: deque[Any] = deque()
        self._bytes = 0  # of the items waiting and of those the writer is writing
        self._urgent = False
        self._cond = threading.Condition()

    def put(self, item: Any, size: int, droppable: bool = True) -> bool:
        with self._cond:
            if droppable and self._bytes + size > self.max_bytes:
                return False
            self._items.append(item)
            self._bytes += size
            if not droppable or self._bytes >= WAKE_BYTES:
                self._urgent = True
                self._cond.notify()
            return True

    def take(self, timeout: float) -> list[Any]:
        """Every item waiting, in order (waiting up to `timeout` unless one is urgent);
        call `release` with their sizes once they are written."""
        with self._cond:
            if not self._urgent:
                self._cond.wait(timeout)
            self._urgent = False
            items = list(self._items)
            self._items.clear()
            return items

    def release(self, size: int) -> None:
        """`size` bytes of taken items are written: room for new ones."""
        with self._cond:
            self._bytes -= size


@dataclass
class _Block:
    """Consecutive rows kept by the physics thread until they are queued together."""

    first: int  # the first row's number (its step: first * every)
    integration: np.ndarray  # [envs, capacity, state size]
    controls: list[list[ControlState]]  # per env, per row kept (shared while a capture holds)
    since: float  # time.monotonic() when it was started
    filled: int = 0

    @staticmethod
    def new(envs: int, first: int, count: int, size: int, spare: deque[np.ndarray]) -> _Block:
        """A block for at least `count` rows: a spare one (written already) if it fits.
        A fresh block's pages are faulted in as its rows are copied: with the node's malloc
        settings (core/memory.py) a row cost 0.89 us into fresh memory, 0.74 into a reused
        block (1.1 and 0.4 when the mmap threshold was 128 KiB)."""
        capacity = max(count, BLOCK_BYTES // (8 * size * envs))
        block = spare.pop() if spare else None
        if block is None or block.shape[1] < count:
            block = np.empty((envs, capacity, size))
        return _Block(first, block, [[] for _ in range(envs)], time.monotonic())

    def rows(self, every: int) -> Rows:
        """The rows kept, as the writer takes them."""
        steps = np.arange(self.first, self.first + self.filled, dtype=np.int64) * every
        return Rows(steps, self.integration[:, : self.filled], self.controls)


@dataclass
class Summary:
    """How a recording ended."""

    folder: Path
    steps: int
    rows: int
    changes: int
    messages: int
    dropped_rows: int
    dropped_messages: int
    error: str | None
    closed: bool  # states.h5 written and the bag closed

    def text(self) -> str:
        """One paragraph for a service reply."""
        lost = ""
        if self.dropped_rows or self.dropped_messages:
            lost = (
                f"; dropped (the disk fell behind): {self.dropped_rows} row(s), "
                f"{self.dropped_messages} message(s)"
            )
        head = f"episode {self.folder.name}: {self.steps} step(s), {self.rows} row(s), "
        head += f"{self.changes} change(s), {self.messages} message(s){lost}"
        if self.error:
            return f"{head}; recording failed: {self.error}"
        return head + ("" if self.closed else "; not closed")


class Recording:
    """An episode being recorded into `folder` (new, empty)."""

    def __init__(
        self,
        folder: Path,
        h: MujocoHandler,
        topics: list[TopicSpec],
        every: int = 1,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
        bag_reserve: int | None = None,
    ) -> None:
        """Call with the simulation held: the first state is captured here."""
        if every < 1:
            raise SnapshotError(f"record_every must be >= 1, got {every}")
        self.folder = folder
        self.every = every
        self.facts = h.facts()
        self._version = h.model_version
        self._state_size = mujoco.mj_stateSize(self.facts.model, INTEGRATION_STATE)
        self._queue = _Queue(queue_bytes)
        self.step = 0
        self.dropped_rows = 0
        self.dropped = [0] * len(topics)
        self.error: str | None = None
        self.ended: str | None = None  # why it stopped recording before a stop
        self._row_bytes = 0
        self._writes = h.writes  # the handler's writes seen (_note_change)
        #: the state just before the first write since the last batch (_before_write)
        self._before: list[PhysicsState] | None = None
        #: per env the control capture that holds while nothing writes (None: stepping
        #: changes it) and the handler's count of writes it was taken at (_held_controls)
        self._held: list[ControlState | None] = []
        self._held_writes = -1
        self._block: _Block | None = None  # rows not queued yet
        #: held while rows are kept or queued: the writer queues a block physics left
        self._rows_lock = threading.Lock()
        #: blocks the writer has written, for the physics thread to fill again
        self._spare: deque[np.ndarray] = deque(maxlen=8)
        try:
            self._stream = StreamWriter(folder / JOURNAL, self.facts, every)
            kwargs = {} if bag_reserve is None else {"reserve": bag_reserve}
            self._bag = BagWriter(folder / BAG, topics, **kwargs)
        except OSError as exc:
            raise SnapshotError(f"cannot start recording in {folder}: {os_problem(exc)}") from None
        self._stream.write([Checkpoint(0, ROW, self._capture(h))])
        h.before_write = self._before_write
        self._thread = threading.Thread(target=self._write, name="recording", daemon=True)
        self._thread.start()

    # -- the physics thread (under the lock) ------------------------------------------
    def advance(self, h: MujocoHandler, n: int) -> None:
        """Take n steps of every env, recording rows and changes."""
        if self.ended is not None or self.error is not None:
            self._detach(h)
            h.step(n=n)
            return
        if h.model_version != self._version:
            self.ended = f"the model changed at step {self.step} (spawn, delete or a new world)"
            self._detach(h)
            with self._rows_lock:
                self._flush()
                self._queue.put(_END, 0, droppable=False)
            h.step(n=n)
            return
        with self._rows_lock:
            self._advance(h, n)

    def _advance(self, h: MujocoHandler, n: int) -> None:
        self._note_change(h)
        every, done = self.every, self.step
        count = (done + n) // every - done // every  # rows falling in this batch
        if count == 0:
            h.step(n=n)
            self.step += n
            return
        block = self._block
        if block is None or block.filled + count > block.integration.shape[1]:
            self._flush()
            block = self._block = _Block.new(
                h.num_envs, done // every + 1, count, self._state_size, self._spare
            )
        start = block.filled
        out = [None if c is None else rows[start : start + count] for c, rows in zip(
            self._held_controls(h), block.integration)]  # fmt: skip
        sample = self._sampler(h, block, start) if any(o is None for o in out) else None
        h.step_sampled(n, every, done, out, sample)
        for e, c in enumerate(self._held):
            if c is not None:
                block.controls[e].extend([c] * count)
        block.filled += count
        self.step += n
        if time.monotonic() - block.since >= WAKE_SECONDS:
            self._flush()

    def _held_controls(self, h: MujocoHandler) -> list[ControlState | None]:
        """Per env the control capture that holds for every row of this batch (None where
        stepping changes the control state): taken once after each write, not per batch,
        since only a write can change them."""
        if h.writes != self._held_writes:
            self._held_writes = h.writes
            self._held = [
                None if h.control_moving(e) else h.capture(e).control for e in range(h.num_envs)
            ]
        for e, c in enumerate(self._held):
            if c is None and not h.control_moving(e):  # stepping ended what moved it
                self._held[e] = h.capture(e).control
        return self._held

    @staticmethod
    def _sampler(
        h: MujocoHandler, block: _Block, start: int
    ) -> Callable[[int, int, mujoco.MjData], None]:
        """What keeps a row of an env whose control state stepping changes: a capture."""
        integration, controls = block.integration, block.controls

        def sample(env: int, row: int, data: mujoco.MjData) -> None:
            state = h.capture(env)
            integration[env, start + row] = state.integration
            assert state.control is not None
            controls[env].append(state.control)

        return sample

    def _flush_stale(self) -> None:
        """Queue the rows kept WAKE_SECONDS ago or earlier (the writer's thread: physics
        may be paused, and its rows must still reach the disk)."""
        with self._rows_lock:
            block = self._block
            if block is not None and time.monotonic() - block.since >= WAKE_SECONDS:
                self._flush()

    def _flush(self) -> None:
        """Queue the rows kept so far (dropped together if they do not fit); with
        _rows_lock held, so that they go before what follows them."""
        block, self._block = self._block, None
        if block is None or not block.filled:
            return
        rows = block.rows(self.every)
        if not self._queue.put(rows, rows.integration.nbytes):
            self.dropped_rows += block.filled

    def room(self) -> int | None:
        """No limit on the steps a batch may take."""
        return None

    def finish_under_lock(self, h: MujocoHandler) -> None:
        """The last checkpoint (the current state); call with the simulation held, then
        detach the recording from the loop and call `close`."""
        with self._rows_lock:
            self._flush()
            if self.ended is None and self.error is None and h.model_version == self._version:
                if not self._note_change(h) and self.step % self.every:
                    self._put([Checkpoint(self.step, ROW, self._capture(h))], droppable=False)
            self._queue.put(_END, 0, droppable=False)
        self._detach(h)

    def _before_write(self, h: MujocoHandler) -> None:
        """The handler is about to write: keep the state as it is, if this is the first
        write since the last batch (the model is still the one recorded)."""
        if self._before is None and h.model_version == self._version:
            self._before = self._capture(h)

    def _detach(self, h: MujocoHandler) -> None:
        if h.before_write == self._before_write:
            h.before_write = None

    def _note_change(self, h: MujocoHandler) -> bool:
        if h.writes == self._writes:  # nothing wrote: the state is what stepping made it
            return False
        self._writes = h.writes
        before, self._before = self._before, None
        assert before is not None, "the handler calls before_write before every write"
        now = self._capture(h)
        if all(same_state(a, b) for a, b in zip(before, now)):
            return False
        what = set()
        for a, b in zip(before, now):
            what.update(describe_change(h.model, a, b))
        self._flush()  # the rows before it go first
        self._put([Checkpoint(self.step, CHANGE, now, ", ".join(sorted(what)))], droppable=False)
        return True

    @staticmethod
    def _capture(h: MujocoHandler) -> list[PhysicsState]:
        return [h.capture(e) for e in range(h.num_envs)]

    def _put(self, cps: list[Checkpoint], droppable: bool = True) -> None:
        """Queue checkpoints together (rows are dropped together when they do not fit)."""
        if not self._row_bytes:
            self._row_bytes = sum(s.integration.nbytes + 512 for s in cps[0].states)
        rows = droppable and all(cp.kind == ROW for cp in cps)
        if not self._queue.put(cps, self._row_bytes * len(cps), rows):
            self.dropped_rows += len(cps)

    # -- topic taps (any thread) -----------------------------------------------------
    def message(self, index: int, stamp_ns: int, data: bytes) -> None:
        """A message of topic `index` received at sim time `stamp_ns`."""
        if self.ended is not None or self.error is not None:
            return
        if not self._queue.put((index, stamp_ns, data), len(data) + 64):
            self.dropped[index] += 1

    # -- the writer thread -----------------------------------------------------------
    def _write(self) -> None:
        try:
            while self._write_taken(self._queue.take(WAKE_SECONDS)):
                self._bag.commit_due()
                self._flush_stale()
        except OSError as exc:
            self.error = f"cannot write {self.folder}: {os_problem(exc)}"
            self._bag.abort()
            self._stream.close()

    def _write_taken(self, items: list[Any]) -> bool:
        """Write taken items in order, consecutive rows in one table; False at the end."""
        rows: list[Rows] = []
        size = 0
        for item in items:
            if isinstance(item, Rows):
                rows.append(item)
                size += item.integration.nbytes
                continue
            if rows:
                self._write_rows(rows)
                rows = []
            if item is _END:
                return False
            if isinstance(item, list):  # checkpoints
                self._stream.write(item)
                size += self._row_bytes * len(item)
            else:
                self._bag.write(*item)
                size += len(item[2]) + 64
        if rows:
            self._write_rows(rows)
        self._queue.release(size)
        return True

    def _write_rows(self, rows: list[Rows]) -> None:
        """Consecutive rows in one table; their blocks are then the physics thread's spares."""
        self._stream.write_rows(Rows.joined(rows))
        self._spare.extend(r.integration.base for r in rows if r.integration.base is not None)

    # -- stopping --------------------------------------------------------------------
    def close(self, timeout: float = 60.0) -> Summary:
        """After `finish_under_lock`: wait for the writer, close the bag and the journal,
        write states.h5 (atomically) and remove the journal."""
        self._thread.join(timeout)
        closed = False
        if self.error is None:
            try:
                self._bag.close()
                self._stream.end(self._info())
                self._stream.close()
                data = read_journal(self.folder / JOURNAL)
                write_states(self.facts, self.folder / STATES, data, self._info())
                (self.folder / JOURNAL).unlink()
                closed = True
            except OSError as exc:
                self.error = f"cannot close {self.folder}: {os_problem(exc)}"
        return Summary(
            self.folder,
            self.step,
            self._stream.rows,
            self._stream.changes,
            sum(self._bag.counts),
            self.dropped_rows,
            sum(self.dropped),
            self.error,
            closed,
        )

    def _info(self) -> dict[str, Any]:
        return {
            "steps": self.step,
            "every": self.every,
            "dropped_rows": self.dropped_rows,
            "dropped_messages": {t.name: d for t, d in zip(self._bag.topics, self.dropped) if d},
            "ended": self.ended,
            "topics": [t.name for t in self._bag.topics],
        }

    def status(self) -> tuple[bool, str]:
        """(healthy, one line) for ~/status."""
        dropped = sum(self.dropped)
        text = (
            f"recording {self.folder.name}: step {self.step}, {self._stream.rows} row(s), "
            f"{self._stream.changes} change(s), {sum(self._bag.counts)} message(s) written, "
            f"dropped {self.dropped_rows} row(s) and {dropped} message(s)"
        )
        if self.error:
            return False, f"{text}; RECORDING FAILED: {self.error}"
        if self.ended:
            return True, f"{text}; stopped recording: {self.ended}"
        return True, text
