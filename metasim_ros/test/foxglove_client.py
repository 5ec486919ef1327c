# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""A Foxglove WebSocket client for tests, written from the protocol's specification
(foxglove/ws-protocol docs/spec.md): JSON control messages, binary message data and
service calls (little-endian), and protobuf payloads decoded with the schemas the
server advertises (google.protobuf), so nothing of the server's code decodes them."""

from __future__ import annotations

import base64
import json
import struct
import time
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from websockets.sync.client import ClientConnection, connect

#: The subprotocol foxglove-sdk's server speaks.
SUBPROTOCOL = "foxglove.sdk.v1"
MESSAGE_DATA, SERVICE_RESPONSE = 0x01, 0x03  # server's binary opcodes
SERVICE_REQUEST = 0x02  # client's binary opcode


class FoxgloveClient:
    """One connection: what the server advertised, subscriptions, service calls."""

    def __init__(self, url: str, timeout: float = 20.0) -> None:
        self.ws: ClientConnection = connect(
            url, subprotocols=[SUBPROTOCOL], max_size=None, open_timeout=timeout
        )
        self._timeout = timeout
        self.server_info: dict = {}
        self.channels: dict[str, dict] = {}  # by topic
        self.services: dict[str, dict] = {}  # by name
        self.failures: list[dict] = []  # serviceCallFailure messages
        self._subscribed: dict[int, str] = {}  # subscription id -> topic
        self._messages: list[tuple[str, bytes]] = []
        self._replies: dict[int, bytes] = {}
        self._next_call = 1
        self._until(lambda: self.server_info and self.channels and self.services, "advertising")

    def close(self) -> None:
        self.ws.close()

    def _take(self, timeout: float) -> None:
        """Read one message (or none within `timeout`)."""
        try:
            raw = self.ws.recv(timeout=timeout)
        except TimeoutError:
            return
        if isinstance(raw, str):
            message = json.loads(raw)
            op = message["op"]
            if op == "serverInfo":
                self.server_info = message
            elif op == "advertise":
                self.channels.update({c["topic"]: c for c in message["channels"]})
            elif op == "advertiseServices":
                self.services.update({s["name"]: s for s in message["services"]})
            elif op == "serviceCallFailure":
                self.failures.append(message)
            return
        if raw[0] == MESSAGE_DATA:
            subscription, _receive_time = struct.unpack_from("<IQ", raw, 1)
            self._messages.append((self._subscribed.get(subscription, ""), raw[13:]))
        elif raw[0] == SERVICE_RESPONSE:
            _service, call, length = struct.unpack_from("<III", raw, 1)
            self._replies[call] = raw[13 + length :]

    def _until(self, done: Any, what: str) -> Any:
        deadline = time.monotonic() + self._timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {self._timeout}s waiting for {what}")
            self._take(0.1)
        return done()

    def subscribe(self, *topics: str) -> None:
        """Subscribe to topics (once the server advertised them)."""
        self._until(lambda: all(t in self.channels for t in topics), f"{topics} advertised")
        subs = []
        for topic in topics:
            sub = len(self._subscribed) + 1
            self._subscribed[sub] = topic
            subs.append({"id": sub, "channelId": self.channels[topic]["id"]})
        self.ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))

    def next_message(self, topic: str) -> bytes:
        """The next payload on a subscribed topic (those before it dropped)."""
        self._messages.clear()

        def found() -> bytes | None:
            return next((p for t, p in self._messages if t == topic), None)

        return self._until(found, f"a message on {topic}")

    def decoder(self, topic: str) -> type:
        """The protobuf class of a channel, built from the schema it advertised."""
        channel = self.channels[topic]
        assert channel["encoding"] == "protobuf", channel
        files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(channel["schema"]))
        pool = descriptor_pool.DescriptorPool()
        for f in files.file:
            pool.Add(f)
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(channel["schemaName"]))

    def send_call(self, service: str | int, payload: bytes, encoding: str = "json") -> int:
        """Send a service call request (a name, or a raw id); its call id."""
        sid = self.services[service]["id"] if isinstance(service, str) else service
        call, self._next_call = self._next_call, self._next_call + 1
        enc = encoding.encode()
        self.ws.send(struct.pack("<BIII", SERVICE_REQUEST, sid, call, len(enc)) + enc + payload)
        return call

    def call(self, service: str, request: dict | None = None) -> dict:
        """A JSON service call; the JSON reply."""
        call = self.send_call(service, json.dumps(request or {}).encode())
        return json.loads(self._until(lambda: self._replies.get(call), f"the reply of {service}"))

    def failure(self, call: int) -> dict:
        """The serviceCallFailure of a call."""
        return self._until(
            lambda: next((f for f in self.failures if f["callId"] == call), None),
            f"the failure of call {call}",
        )
