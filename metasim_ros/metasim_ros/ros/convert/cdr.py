# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Periodic messages of a fixed layout published as CDR bytes made from a template.

Filling a ROS message in Python and handing it to rclpy (which converts every field to C
and serializes it) cost the physics thread ~0.6 ms per ~/world_state of the default
scene. Between two model changes a periodic message keeps its layout: the same names,
the same array lengths; only its numbers and its stamp change. So the message is filled
once, serialized by rclpy (`serialize_message`), and the place of each of its float64
numbers and of each stamp in those bytes is found by walking the message in CDR order;
later publishes write the new numbers into a copy of those bytes with numpy and publish
the bytes (rclpy's Publisher.publish takes a serialized message).

Encoding: what rmw_fastrtps writes (XCDR1 little-endian: a 4-byte encapsulation header,
then each primitive aligned to its size, up to 8, from the end of that header; strings
and sequences start with a uint32 count). The walk checks itself against rclpy's bytes
when the template is made (every float64 read back at its place). The bytes published
are those a reader receives when rclpy publishes the message itself: the CDR stream only
(serialize_message's buffer is as long as its size estimate, which counts padding that
empty float64 sequences do not get, and may end in bytes of no meaning), padding bytes
zero (Fast CDR leaves them as they were in memory). A stream must end on a 4-byte
boundary (every templated message does; Fast DDS pads others and says so in the header).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rclpy.serialization import serialize_message
from rosidl_parser.definition import (
    AbstractNestedType,
    AbstractSequence,
    AbstractString,
    AbstractWString,
    Array,
    BasicType,
    NamespacedType,
)

from metasim_ros.ros.convert.geometry import stamp

_HEADER = 4  # the encapsulation header before the CDR stream: alignment counts from its end
_SIZES = {
    "boolean": 1,
    "octet": 1,
    "char": 1,
    "uint8": 1,
    "int8": 1,
    "uint16": 2,
    "int16": 2,
    "wchar": 2,
    "uint32": 4,
    "int32": 4,
    "float": 4,
    "uint64": 8,
    "int64": 8,
    "double": 8,
}
_QUATERNION = ("geometry_msgs", "Quaternion")
_TIME = ("builtin_interfaces", "Time")


class _Walk:
    """Offsets (from the end of the header) of a message's float64 numbers in field order
    (a geometry_msgs/Quaternion's as w, x, y, z: MuJoCo's order), of its stamps' sec and
    nanosec, and the padding; the numbers themselves, to check the offsets."""

    def __init__(self) -> None:
        self.pos = 0
        self.doubles: list[int] = []
        self.values: list[float] = []
        self.secs: list[int] = []
        self.nanosecs: list[int] = []
        self.padding: list[int] = []

    def align(self, size: int) -> None:
        skip = -self.pos % size
        self.padding.extend(range(self.pos, self.pos + skip))
        self.pos += skip

    def message(self, msg: object) -> None:
        fields = msg.get_fields_and_field_types()
        kind = type(msg)
        name = (kind.__module__.split(".")[0], kind.__name__)
        start = len(self.doubles)
        for field, slot in zip(fields, kind.SLOT_TYPES):
            if name == _TIME:
                self.align(4)
                (self.secs if field == "sec" else self.nanosecs).append(self.pos)
            self.value(getattr(msg, field), slot)
        if name == _QUATERNION:  # x, y, z, w -> w, x, y, z
            for found in (self.doubles, self.values):
                found[start:] = found[start + 3 : start + 4] + found[start : start + 3]

    def value(self, value: object, slot: object) -> None:
        if isinstance(slot, BasicType):
            size = _SIZES[slot.typename]
            self.align(size)
            if slot.typename == "double":
                self.doubles.append(self.pos)
                self.values.append(float(value))
            self.pos += size
        elif isinstance(slot, AbstractString) and not isinstance(slot, AbstractWString):
            self.align(4)
            self.pos += 4 + len(value.encode()) + 1
        elif isinstance(slot, NamespacedType):
            self.message(value)
        elif isinstance(slot, AbstractNestedType):
            if isinstance(slot, AbstractSequence):
                self.align(4)
                self.pos += 4
            elif not isinstance(slot, Array):
                raise TypeError(f"{slot} is not templated")
            self.items(value, slot.value_type)
        else:
            raise TypeError(f"{slot} is not templated")

    def items(self, values: Sequence, slot: object) -> None:
        if isinstance(slot, BasicType):
            size = _SIZES[slot.typename]
            if len(values):
                self.align(size)
            if slot.typename == "double":
                at = self.pos + size * np.arange(len(values))
                self.doubles.extend(at.tolist())
                self.values.extend(float(v) for v in values)
            self.pos += size * len(values)
        else:
            for v in values:
                self.value(v, slot)


class CdrTemplate:
    """The serialization of one filled message, with the numbers and stamp rewritable.

    `serialize(sim_time, numbers)`: the bytes of the same message with every Time in it
    set to stamp(sim_time) and its float64 numbers, in field order (quaternions w, x, y,
    z), set to `numbers`. Holds for as long as the message would keep its layout (the
    caller knows: same names and array lengths)."""

    def __init__(self, msg: object) -> None:
        data = bytearray(serialize_message(msg))
        walk = _Walk()
        walk.message(msg)
        if len(data) < _HEADER + walk.pos or walk.pos % 4:
            raise ValueError(f"CDR walk of {type(msg).__name__} ended at {walk.pos}: not rclpy's")
        del data[_HEADER + walk.pos :]  # serialize_message's buffer is its size estimate
        for i in walk.padding:
            data[_HEADER + i] = 0
        self._data = data
        # float64 numbers are 8-aligned from the header's end: one view reaches them all
        self._f8 = np.frombuffer(data, "<f8", offset=_HEADER, count=(len(data) - _HEADER) // 8)
        self._at = np.asarray(walk.doubles, dtype=np.intp) // 8
        self.size = len(walk.doubles)  # how many numbers serialize() takes
        if not np.array_equal(
            self._f8[self._at].view(np.int64), np.array(walk.values).view(np.int64)
        ):
            raise ValueError(f"CDR walk of {type(msg).__name__}: numbers not where rclpy put them")
        self._u4 = np.frombuffer(data, "<u4", offset=_HEADER, count=(len(data) - _HEADER) // 4)
        self._secs = np.asarray(walk.secs, dtype=np.intp) // 4
        self._nanosecs = np.asarray(walk.nanosecs, dtype=np.intp) // 4

    def serialize(self, sim_time: float, numbers: np.ndarray) -> bytes:
        """The message's bytes with these numbers and this stamp."""
        if len(numbers) != self.size:
            raise ValueError(f"{len(numbers)} numbers for a template of {self.size}")
        t = stamp(sim_time)
        self._u4[self._secs] = t.sec & 0xFFFFFFFF  # int32, two's complement
        self._u4[self._nanosecs] = t.nanosec
        self._f8[self._at] = numbers
        return bytes(self._data)
