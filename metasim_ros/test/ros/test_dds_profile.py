# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""When sim_node applies its Fast DDS profile (ros/dds_profile.py): only where the user
configured nothing of Fast DDS. What the profile does to the running node is tested
through the node (test_node_camera_load.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from metasim_ros.core.limits import CAMERA_MAX_PIXELS
from metasim_ros.ros import dds_profile

VARIABLE = dds_profile.PROFILE_VARIABLE


def test_applied_where_nothing_is_configured(tmp_path):
    environ: dict[str, str] = {}
    said = dds_profile.apply(environ, tmp_path)
    assert environ == {VARIABLE: str(dds_profile.PROFILE)}
    assert dds_profile.PROFILE.is_file() and str(dds_profile.PROFILE) in said


@pytest.mark.parametrize(
    "environ",
    [
        {VARIABLE: "/somewhere/mine.xml"},
        {dds_profile.TRANSPORTS_VARIABLE: "LARGE_DATA"},
        {"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"},
    ],
)
def test_left_alone_where_the_user_chose(tmp_path, environ):
    given = dict(environ)
    said = dds_profile.apply(environ, tmp_path)
    assert environ == given
    assert next(iter(given.values())) in said


def test_a_profile_in_the_working_directory_is_the_users(tmp_path):
    (tmp_path / dds_profile.CWD_PROFILE).write_text("<profiles/>")
    environ: dict[str, str] = {}
    assert str(tmp_path / dds_profile.CWD_PROFILE) in dds_profile.apply(environ, tmp_path)
    assert environ == {}
    environ = {dds_profile.SKIP_CWD_PROFILE: "1"}  # Fast DDS does not load it then
    dds_profile.apply(environ, tmp_path)
    assert environ[VARIABLE] == str(dds_profile.PROFILE)


def test_both_fast_dds_rmw_implementations_take_it(tmp_path):
    for rmw in ("rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp"):
        environ = {"RMW_IMPLEMENTATION": rmw}
        dds_profile.apply(environ, tmp_path)
        assert environ[VARIABLE] == str(dds_profile.PROFILE)


def test_the_segment_holds_two_rounds_of_images_at_the_default_limit():
    ns = {"f": "http://www.eprosima.com"}
    root = ET.parse(dds_profile.PROFILE).getroot()
    size = int(root.find(".//f:transport_descriptor[f:type='SHM']/f:segment_size", ns).text)
    assert size >= 2 * 7 * CAMERA_MAX_PIXELS  # rgb8 (3 bytes) and 32FC1 depth (4 bytes)


def test_a_reply_waits_for_its_client_to_be_discovered():
    """rmw_fastrtps (rmw_response.cpp, 9.2.0) drops a reply whose client's reply reader the
    node has not discovered within the reply writer's max_blocking_time; its writers take
    the profile named "service", which must keep the 100 ms heartbeats too."""
    ns = {"f": "http://www.eprosima.com"}
    root = ET.parse(dds_profile.PROFILE).getroot()
    writer = root.find(".//f:data_writer[@profile_name='service']", ns)
    blocking = writer.find("f:qos/f:reliability/f:max_blocking_time", ns)
    seconds = int(blocking.find("f:sec", ns).text) + int(blocking.find("f:nanosec", ns).text) / 1e9
    assert seconds >= 1.0
    heartbeat = writer.find("f:times/f:heartbeat_period/f:nanosec", ns)
    assert int(heartbeat.text) == 100_000_000


def lease_seconds() -> float:
    """The lease the node's participant announces (how long peers keep it after a crash)."""
    ns = {"f": "http://www.eprosima.com"}
    root = ET.parse(dds_profile.PROFILE).getroot()
    lease = root.find(".//f:participant/f:rtps/f:builtin/f:discovery_config/f:leaseDuration", ns)
    return int(lease.find("f:sec", ns).text) + int(lease.find("f:nanosec", ns).text) / 1e9


def test_a_crashed_node_is_forgotten_within_seconds():
    """Peers keep a participant that left without its goodbye until its lease ends (Fast
    DDS: 20 s): long enough for a client to take a dead node's service for the node started
    in its place. The node's lease is 5 s, announced every second (five misses to lose
    it)."""
    ns = {"f": "http://www.eprosima.com"}
    root = ET.parse(dds_profile.PROFILE).getroot()
    every = root.find(".//f:discovery_config/f:leaseAnnouncement/f:sec", ns)
    assert lease_seconds() <= 5.0 and int(every.text) * 5 <= lease_seconds()
