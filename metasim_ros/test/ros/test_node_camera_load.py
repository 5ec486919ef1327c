# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Cameras never starve a service, and what they take is bounded and given back.

- A camera read at the defaults (640x480, 15 Hz) while get_states and set_states are
  called at 20 Hz by the same process: every reply within 0.5 s, none missing. On Fast
  DDS's default transports a frame (2.1 MB) overran the node's 512 KiB shared-memory
  segment, which took back replies still queued at the client: they came 1-3 s late, or
  after more than 5 s. The node applies its own Fast DDS profile unless the user set one.
- camera_max_pixels: cameras over it stop the start with one line naming it, and a model
  change that would bring them is refused; while a camera at the limit is read (by
  another process), every ~/status reply comes within 0.5 s (the test prints p50/p99/max;
  the 50 ms target is measured in bench/bench_cameras.py, not asserted here: a timed
  bound failed under load on a shared 2-core machine); what reading took (renderer,
  image buffers, the frames DDS keeps) goes back once nobody reads.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from metasim_msgs.srv import GetStates, SetStates
from rclpy.qos import qos_profile_parameters
from sensor_msgs.msg import Image
from simulation_interfaces import msg as sm
from simulation_interfaces import srv as ss
from std_srvs.srv import Trigger

from metasim_ros.core.limits import CAMERA_MAX_PIXELS
from metasim_ros.ros import dds_profile

NODE = "/sim_node"
RGB, DEPTH = f"{NODE}/camera0/image_raw", f"{NODE}/camera0/depth/image_raw"
#: Seconds of get_states + set_states calls while the camera is read.
DURATION = 25.0
#: Seconds between two rounds of calls (20 Hz, as the soak that found the delays).
PERIOD = 0.05
#: The bound on every reply while a camera is read (issue: "no reply slower than 0.5 s").
SLOW = 0.5
#: A reply not here after this many seconds is missing.
MISSING = 5.0
#: A camera of at most CAMERA_MAX_PIXELS (the default limit): 1920x1080.
BIG = {"camera_width": 1920, "camera_height": 1080}
#: Bytes per pixel that reading a camera holds at least (renderer, image buffers, the two
#: frames DDS keeps per image topic: 36-40 measured) and that must go back.
HELD_PER_PIXEL = 20


def timed_call(client, service_client, request, within: float) -> tuple[float | None, object]:
    """(seconds the reply took or None if none came `within`, the reply)."""
    start = time.monotonic()
    future = service_client.call_async(request)
    while not future.done():
        if time.monotonic() - start > within:
            service_client.remove_pending_request(future)
            return None, None
        client.executor.spin_once(timeout_sec=0.005)
    return time.monotonic() - start, future.result()


def spin_for(client, seconds: float) -> None:
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        client.executor.spin_once(timeout_sec=left)


@pytest.fixture
def no_user_profile(monkeypatch):
    """The node as a user starts it who configured nothing of Fast DDS."""
    for variable in (dds_profile.PROFILE_VARIABLE, dds_profile.TRANSPORTS_VARIABLE):
        monkeypatch.delenv(variable, raising=False)


def test_reading_a_camera_never_delays_get_and_set_states(no_user_profile, start_node, client):
    start_node().wait_serving(client)  # the defaults: 640x480 at 15 Hz, real time
    images = [0]
    client.node.create_subscription(Image, RGB, lambda _m: images.__setitem__(0, images[0] + 1), 10)
    get = client.node.create_client(
        GetStates, f"{NODE}/get_states", qos_profile=qos_profile_parameters
    )
    put = client.node.create_client(
        SetStates, f"{NODE}/set_states", qos_profile=qos_profile_parameters
    )
    client.spin_until(lambda: get.service_is_ready() and put.service_is_ready(), 20.0, "services")
    client.spin_until(lambda: images[0] > 0, 60.0, "a camera image")
    # warm: a first call may wait for the reply reader to match (rmw_fastrtps: 100 ms)
    _, state = timed_call(client, get, GetStates.Request(), MISSING)
    timed_call(client, put, SetStates.Request(states=state.states), MISSING)

    took: dict[str, list[float]] = {"get_states": [], "set_states": []}
    missing: list[str] = []
    first, end = images[0], time.monotonic() + DURATION
    while time.monotonic() < end:
        tick = time.monotonic()
        for name, service, request in (
            ("get_states", get, GetStates.Request()),
            ("set_states", put, SetStates.Request(states=state.states)),
        ):
            seconds, reply = timed_call(client, service, request, MISSING)
            if seconds is None:
                missing.append(f"{name} at {tick - end + DURATION:.1f} s")
                continue
            took[name].append(seconds)
            if name == "get_states":
                state = reply
            else:
                assert reply.success, reply.message
        spin_for(client, tick + PERIOD - time.monotonic())
    read = images[0] - first
    print(
        f"\n{read} images in {DURATION:.0f} s; "
        + "; ".join(
            f"{k}: {len(v)} calls, p50 {np.median(v) * 1e3:.1f} ms, p99 "
            f"{np.percentile(v, 99) * 1e3:.1f} ms, max {max(v) * 1e3:.1f} ms"
            for k, v in took.items()
        )
    )
    assert read >= 3 * DURATION, f"the camera was not read throughout ({read} images)"
    assert not missing, f"no reply within {MISSING:.0f} s: {missing}"
    slow = {k: [round(s, 2) for s in v if s > SLOW] for k, v in took.items()}
    assert not any(slow.values()), f"replies slower than {SLOW} s: {slow}"


def shm_segments(pid: int) -> list[int]:
    """Sizes (bytes) of the Fast DDS shared-memory segments the process has mapped (each
    transport's own; not the ports it listens on)."""
    sizes: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split()
        name = Path(fields[-1]).name if len(fields) >= 6 else ""
        if name.startswith("fastdds_") and not name.startswith("fastdds_port"):
            start, end = (int(x, 16) for x in fields[0].split("-"))
            sizes[name] = sizes.get(name, 0) + end - start
    return sorted(sizes.values())


USER_PROFILE = """<?xml version="1.0" encoding="UTF-8" ?>
<dds xmlns="http://www.eprosima.com"><profiles>
  <transport_descriptors><transport_descriptor>
    <transport_id>user_shm</transport_id><type>SHM</type><segment_size>3145728</segment_size>
  </transport_descriptor></transport_descriptors>
  <participant profile_name="user" is_default_profile="true"><rtps>
    <userTransports><transport_id>user_shm</transport_id></userTransports>
    <useBuiltinTransports>true</useBuiltinTransports>
  </rtps></participant>
</profiles></dds>
"""


def test_the_node_applies_its_fast_dds_profile_unless_the_user_set_one(
    no_user_profile, start_node, client, monkeypatch, tmp_path
):
    node = start_node({"paused": True}).wait_serving(client)
    ours = shm_segments(node.proc.pid)
    assert node.stop() == 0
    assert f"Fast DDS profile {dds_profile.PROFILE}" in node.output, node.output
    assert max(ours) >= 32 * 2**20, f"segments of {ours} bytes"  # the profile's 64 MiB

    profile = tmp_path / "user.xml"
    profile.write_text(USER_PROFILE)
    monkeypatch.setenv(dds_profile.PROFILE_VARIABLE, str(profile))
    node = start_node({"paused": True}).wait_serving(client)
    theirs = shm_segments(node.proc.pid)
    assert node.stop() == 0
    assert f"Fast DDS as configured by {dds_profile.PROFILE_VARIABLE}={profile}" in node.output
    assert any(3 * 2**20 <= size < 4 * 2**20 for size in theirs), theirs  # the user's 3 MiB
    assert max(theirs) < 32 * 2**20, theirs


def test_cameras_over_camera_max_pixels_stop_the_start_with_one_line(start_node):
    node = start_node({"paused": True, "camera_width": 8192, "camera_height": 8192})
    node.wait_output(timeout=60)
    assert node.proc.returncode == 1, node.output
    lines = [line for line in node.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("sim_node: cannot start: "), node.output
    assert f"camera_max_pixels={CAMERA_MAX_PIXELS}" in lines[0], lines[0]
    assert f"{8192 * 8192}" in lines[0], lines[0]


def test_a_model_change_over_camera_max_pixels_is_refused(start_node, client):
    start_node({"paused": True, "camera_max_pixels": 640 * 480}).wait_serving(client)
    request = ss.SpawnEntity.Request(name="eye")
    request.entity_resource.resource_string = (
        '<mujoco><worldbody><body name="eye"><camera name="eye_cam"/><geom size="0.05"/>'
        "</body></worldbody></mujoco>"
    )
    r = client.call(ss.SpawnEntity, f"{NODE}/spawn_entity", request)
    assert r.result.result != sm.Result.RESULT_OK
    assert f"camera_max_pixels={640 * 480}" in r.result.error_message, r.result.error_message
    r = client.call(ss.GetEntities, f"{NODE}/get_entities", ss.GetEntities.Request())
    assert "eye" not in r.entities
    assert client.call(Trigger, f"{NODE}/status", Trigger.Request()).success


def image_publishers(client) -> set[bytes]:
    """The endpoint ids of the node's image publishers of camera0 as this process sees
    them."""
    return {
        bytes(info.endpoint_gid)
        for topic in (RGB, DEPTH)
        for info in client.node.get_publishers_info_by_topic(topic)
    }


def read_camera(client, process: psutil.Process) -> tuple[int, int]:
    """Read camera0's colour and depth images until 3 of each came, then stop: (the node's
    RSS while read, its RSS once it made its image publishers anew, which it does after
    it released what reading took)."""
    client.spin_until(lambda: len(image_publishers(client)) == 2, 20.0, "the publishers")
    before = image_publishers(client)
    counts = {RGB: 0, DEPTH: 0}
    subs = [
        client.node.create_subscription(
            Image, t, lambda _m, t=t: counts.__setitem__(t, counts[t] + 1), 10
        )
        for t in counts
    ]
    client.spin_until(lambda: min(counts.values()) >= 3, 60.0, "3 images of each kind")
    reading = process.memory_info().rss
    for sub in subs:
        client.node.destroy_subscription(sub)
    client.spin_until(
        lambda: len(image_publishers(client)) == 2 and not image_publishers(client) & before,
        20.0,
        "the node to make its image publishers anew once nobody reads",
    )
    return reading, process.memory_info().rss


def test_what_reading_a_camera_takes_goes_back_once_nobody_reads(start_node, client):
    node = start_node({"paused": True, **BIG}).wait_serving(client)
    process = psutil.Process(node.proc.pid)
    pixels = BIG["camera_width"] * BIG["camera_height"]
    first = read_camera(client, process)  # it also loads the GL driver, which stays
    second = read_camera(client, process)
    mb = " / ".join(f"{x / 2**20:.0f}" for x in (*first, *second))
    print(f"\nRSS (MB) read / after, twice: {mb}")
    freed = second[0] - second[1]
    assert freed >= HELD_PER_PIXEL * pixels, f"only {freed / 2**20:.0f} MB went back: {mb}"
    assert second[1] <= first[1] + 10 * 2**20, f"memory kept from one reading to the next: {mb}"


def test_status_answers_while_a_camera_at_the_limit_is_read(start_node, client):
    start_node(BIG).wait_serving(client)
    reader = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("image_reader.py")), RGB, DEPTH],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout.readline().strip() == "ready"
        status = client.node.create_client(
            Trigger, f"{NODE}/status", qos_profile=qos_profile_parameters
        )
        client.spin_until(status.service_is_ready, 20.0, "~/status")
        timed_call(client, status, Trigger.Request(), MISSING)  # warm
        took = []
        for _ in range(250):
            seconds, reply = timed_call(client, status, Trigger.Request(), MISSING)
            assert seconds is not None, "no reply from ~/status"
            assert reply.success, reply.message
            took.append(seconds)
            spin_for(client, 0.02)
        out, _ = reader.communicate("stop\n", timeout=30)
        counts = json.loads(out)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait(timeout=5)
    print(
        f"\nimages read meanwhile: {counts}; ~/status p50 {np.median(took) * 1e3:.1f} ms, "
        f"p99 {np.percentile(took, 99) * 1e3:.1f} ms, max {max(took) * 1e3:.1f} ms"
    )
    assert min(counts.values()) >= 10, counts
    assert max(took) <= SLOW, f"~/status took {max(took):.2f} s"
