# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Headless Chromium driven over the DevTools protocol, for tests of the web page.

Debian's `chromium` (apt-get install chromium), started with a fresh profile and the
DevTools port on loopback; the protocol is spoken over `websockets` (already a
dependency): no browser driver package. `find_chromium()` is None where no browser is
installed (the tests skip, saying so)."""

from __future__ import annotations

import base64
import io
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from websockets.sync.client import ClientConnection, connect

#: Flags: no GPU, sandbox, network chatter or first-run work; a fresh profile each time.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
#: The browser window (CSS pixels): the page's panel on the right, the scene left of it.
WINDOW = (1200, 800)


def find_chromium() -> str | None:
    """Debian's chromium, if installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """One headless Chromium process with one page (tab), and its DevTools session."""

    def __init__(self, executable: str, timeout: float = 120.0) -> None:
        """timeout: seconds one DevTools command may take (a screenshot of a WebGL page
        rendered on the CPU took 36 s on a loaded 2-core machine)."""
        self._profile = tempfile.TemporaryDirectory(
            prefix="metasim_chromium_", ignore_cleanup_errors=True
        )
        self._timeout = timeout
        self._ids = itertools.count(1)
        self.proc = subprocess.Popen(
            [
                executable,
                *FLAGS,
                f"--user-data-dir={self._profile.name}",
                f"--window-size={WINDOW[0]},{WINDOW[1]}",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            self._ws = connect(self._browser_socket(), max_size=64 * 1024 * 1024)
            target = self._send("Target.createTarget", url="about:blank")["targetId"]
            self._session = self._send("Target.attachToTarget", targetId=target, flatten=True)[
                "sessionId"
            ]
            self.page("Page.enable")
        except BaseException:
            self.close()
            raise

    def _browser_socket(self) -> str:
        """The browser's DevTools WebSocket, from the file Chromium writes in its profile."""
        active = Path(self._profile.name) / "DevToolsActivePort"
        deadline = time.monotonic() + self._timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}")
            lines = active.read_text().split() if active.exists() else []
            if len(lines) == 2:
                return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
            time.sleep(0.05)
        raise TimeoutError("chromium did not open its DevTools port")

    def _send(self, method: str, session: str | None = None, **params: Any) -> dict:
        """One DevTools command; its result (events met on the way are dropped)."""
        ws: ClientConnection = self._ws
        call = next(self._ids)
        message: dict[str, Any] = {"id": call, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        ws.send(json.dumps(message))
        deadline = time.monotonic() + self._timeout
        while True:
            reply = json.loads(ws.recv(timeout=max(0.01, deadline - time.monotonic())))
            if reply.get("id") == call:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def page(self, method: str, **params: Any) -> dict:
        """A DevTools command to the page."""
        return self._send(method, self._session, **params)

    def open(self, url: str) -> None:
        self.page("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        """A JavaScript expression's value in the page (a promise's, once it settles)."""
        result = self.page(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def text(self) -> str:
        """The page's visible text."""
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def click_button(self, label: str) -> bool:
        """Click the page's button with this label; False if there is none."""
        return bool(
            self.evaluate(
                "(() => { const b = [...document.querySelectorAll('button')].find("
                f"x => x.innerText.trim() === {json.dumps(label)}); "
                "if (!b) return false; b.click(); return true; })()"
            )
        )

    def screenshot(self) -> np.ndarray:
        """The page as RGB pixels [H, W, 3]."""
        data = self.page("Page.captureScreenshot", format="png")["data"]
        return np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB"))

    def wait_for(self, done: Any, timeout: float, what: str) -> Any:
        """Poll `done()` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = done()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            time.sleep(0.1)

    def close(self) -> None:
        """End the browser (its process group) and remove its profile."""
        ws = getattr(self, "_ws", None)
        if ws is not None:
            ws.close()
        if self.proc.poll() is None:  # its helpers (renderer, GPU) are in its group
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self._profile.cleanup()
