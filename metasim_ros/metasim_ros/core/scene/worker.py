# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The node's scene builder, in a worker process: a compile never holds the node, and
one that takes too long or too much memory is stopped, not waited for.

The worker (`main` here, in a new Python process) runs a SceneBuilder under an
address-space limit (RLIMIT_AS: ModelLimits.memory) and dies with the node (the kernel
kills it when the thread that started it ends: PR_SET_PDEATHSIG; it also ends when its
pipe closes). It never touches the simulation: it gets a recipe (sent again whenever it
does not hold it) and an operation, and answers with the new model as MJB bytes, the
map of the state, and the new recipe's last step. `WorkerBuilder` is the node's side,
with SceneBuilder's interface: it waits at most ModelLimits.compile_seconds for an
answer, then kills the worker (the next build starts a new one); `close` kills it at
once, so a node that is told to stop never waits for a compile.

The worker is a boundary for time, memory and crashes, not for privileges: it runs as
the node's user.
"""

from __future__ import annotations

import ctypes
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

import mujoco
import numpy as np

from metasim_ros.core.errors import RequestError, ResourceError, SceneError, UnknownEntityError
from metasim_ros.core.scene.budget import ModelLimits
from metasim_ros.core.scene.builder import (
    Built,
    Operation,
    Recipe,
    SceneBuilder,
    World,
)
from metasim_ros.core.scene.confine import AssetStore
from metasim_ros.core.text import shown

#: The refusals a worker may answer with, by class name (rebuilt on the node's side).
_REFUSALS = {c.__name__: c for c in (ResourceError, UnknownEntityError, SceneError, RequestError)}
#: prctl option: the signal a process gets when the thread that started it ends.
_PR_SET_PDEATHSIG = 1
#: Name of the folders of copies of outside files: the node's pid, then mkdtemp's part.
_STORE_PREFIX = "metasim_worker_assets_"
#: The worker's scheduling priority below the node's (a compile uses every core).
_NICENESS = 10
#: The worker's command: nothing is imported from the working directory (`-c` puts it
#: first on sys.path: it goes before anything is imported; Python 3.10 has no `-P`).
_MAIN = (
    "import sys; del sys.path[0]; "
    "from metasim_ros.core.scene.worker import main; sys.exit(main(sys.argv[1:]))"
)
#: The folder holding the metasim_ros package this module is part of (the worker's code).
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])


class WorkerBuilder:
    """SceneBuilder's interface, served by a worker process (see the module docstring)."""

    #: Seconds a new worker may take to import MuJoCo and say it is ready.
    STARTUP_SECONDS = 60.0

    def __init__(
        self, limits: ModelLimits, warn: Callable[[str], None] = lambda _text: None
    ) -> None:
        """warn: where MuJoCo's warnings about a model go (one text each)."""
        self.limits = limits
        self._warn = warn
        self._store: AssetStore | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None

    # -- the builder's interface ---------------------------------------------------
    def remember(self, recipe: Recipe, spec: mujoco.MjSpec, model: mujoco.MjModel) -> None:
        """Nothing to remember here: the worker builds the recipe itself when asked."""

    def build(
        self,
        recipe: Recipe,
        operation: Operation,
        state: np.ndarray | None = None,
        envs: int = 1,
    ) -> Built:
        """SceneBuilder.build, in the worker."""
        with self._lock:
            if self._closed:
                raise SceneError("the node is stopping: no model is built any more")
            if self._proc is None or self._proc.poll() is not None:  # none yet, or it died
                self._kill()
                self._start()
            reply = self._ask(("build", recipe.key, operation, state, envs, self.limits))
            if reply[0] == "need_recipe":
                reply = self._ask(("recipe", recipe))
        return self._built(recipe, operation, reply)

    def close(self) -> None:
        """Kill the worker (a build waiting for it ends with a refusal) and remove the
        copies of outside files."""
        self._closed = True
        self._kill()
        if self._store is not None:
            shutil.rmtree(self._store.folder, ignore_errors=True)

    # -- the worker process --------------------------------------------------------
    def _start(self) -> None:
        if self._store is None:
            _remove_stale_stores()
            folder = tempfile.mkdtemp(prefix=f"{_STORE_PREFIX}{os.getpid()}_")
            self._store = AssetStore(folder)
        ours, theirs = socket.socketpair()
        # this very package, whatever the working directory; malloc arenas reserve address
        # space (the limit counts it)
        path = os.pathsep.join(p for p in (_PACKAGE_ROOT, os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "PYTHONPATH": path, "MALLOC_ARENA_MAX": "2"}
        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _MAIN,
                str(theirs.fileno()),
                str(self.limits.memory),
                str(self._store.folder),
                str(os.getpid()),
            ],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=env,
            cwd=self._store.folder,  # no relative name can reach the node's directory
        )
        theirs.close()
        self._conn = Connection(ours.detach())
        self._ready = False  # the worker says so once it has imported what it needs

    def _kill(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if proc is not None:
            proc.kill()
            proc.wait()
        if conn is not None:
            conn.close()

    def _ask(self, message: tuple) -> tuple:
        """Send a message and wait for the answer, at most compile_seconds (a worker that
        is still starting first gets STARTUP_SECONDS to be ready); the worker is killed
        when it does not answer in time or ends while working."""
        conn, proc = self._conn, self._proc
        assert conn is not None and proc is not None
        seconds = self.limits.compile_seconds
        try:
            if not self._ready:
                if not conn.poll(self.STARTUP_SECONDS) or conn.recv() != ("ready",):
                    raise EOFError
                self._ready = True
            conn.send(message)
            if not conn.poll(seconds):
                self._kill()
                raise ResourceError(
                    "too_large",
                    f"building the model took longer than {seconds:g} s (parameter "
                    "model_compile_timeout): it was stopped",
                )
            reply = conn.recv()
        except (EOFError, OSError):
            code = proc.poll()
            ready, self._ready = self._ready, False
            self._kill()
            if self._closed:
                raise SceneError("the node is stopping: the model was not built") from None
            how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            if not ready:
                raise RuntimeError(f"the model builder did not start ({how})") from None
            raise ResourceError(
                "too_large",
                f"the model builder ended ({how}) while building the model: it needs more "
                "memory than model_memory_limit, or MuJoCo failed on it",
            ) from None
        if reply[0] == "refused":
            _, name, kind, text = reply
            cls = _REFUSALS.get(name, RequestError)
            raise cls(kind, text) if cls is ResourceError else cls(text)
        if reply[0] == "failed":  # a fault of this package in the worker
            raise RuntimeError(f"the model builder failed:\n{reply[1]}")
        if reply[0] == "built":
            for text in reply[-1]:
                self._warn(text)
        return reply

    def _built(self, recipe: Recipe, operation: Operation, reply: tuple) -> Built:
        _, key, last, mjb, xml, state_map, name, _warnings = reply
        if isinstance(operation, World):
            new = Recipe(last[0], last[1], key=key)
        else:
            new = Recipe(recipe.scene, recipe.world, (*recipe.edits, last), key=key)
        model = mujoco.MjModel.from_binary_path("model.mjb", {"model.mjb": mjb})
        return Built(new, model, xml, state_map, name)


def _remove_stale_stores() -> None:
    """Remove the copies of outside files that killed nodes left (their pid is gone)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_STORE_PREFIX}*"):
        found = re.match(rf"{_STORE_PREFIX}(\d+)_", folder.name)
        if found and not _alive(int(found[1])) and folder.stat().st_uid == os.getuid():
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- the worker's side ------------------------------------------------------------------
def _die_with(parent: int) -> None:
    """Be killed when the node ends (Linux); if it already has, end now."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the closed pipe ends the worker instead
        pass
    if os.getppid() != parent:
        os._exit(0)


def _serve(conn: Connection, store: AssetStore) -> None:
    warnings: list[str] = []
    mujoco.set_mju_user_warning(lambda text: warnings.append(text))
    builder = SceneBuilder(ModelLimits(), store)
    pending: tuple = (None, None, 1)
    conn.send(("ready",))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == "build":
            _, key, operation, state, envs, limits = message
            builder.limits = limits
            pending = (operation, state, envs)
            if not builder.holds(key) and not isinstance(operation, World):
                conn.send(("need_recipe",))
                continue
            recipe = Recipe(key=key)  # a World builds from nothing; else it is held
        else:  # ("recipe", recipe): what the node holds, to build again
            recipe = message[1]
            operation, state, envs = pending
        warnings.clear()
        conn.send(_answer(builder, recipe, operation, state, envs, warnings))


def _answer(
    builder: SceneBuilder,
    recipe: Recipe,
    operation: Operation,
    state: np.ndarray | None,
    envs: int,
    warnings: list[str],
) -> tuple:
    try:
        built = builder.build(recipe, operation, state, envs)
    except ResourceError as exc:
        text = str(exc)
        if "allocate" in text.lower():  # MuJoCo met the address-space limit
            text += (
                f" (the model builder may take {builder.limits.memory} bytes: parameter "
                "model_memory_limit)"
            )
        return ("refused", "ResourceError", exc.kind, text)
    except RequestError as exc:
        return ("refused", type(exc).__name__, "", str(exc))
    except Exception:  # noqa: BLE001 - reported to the node, which logs it as a fault
        return ("failed", traceback.format_exc())
    r = built.recipe
    last = (r.scene, r.world) if isinstance(operation, World) else r.edits[-1]
    buf = np.empty(mujoco.mj_sizeModel(built.model), dtype=np.uint8)
    mujoco.mj_saveModel(built.model, None, buf)
    said = [shown(w, 400) for w in warnings]
    return ("built", r.key, last, buf.tobytes(), built.xml, built.state_map, built.name, said)


def main(argv: list[str]) -> int:
    """The worker: FD MEMORY STORE PARENT_PID (the socket to the node, the address-space
    limit in bytes, the folder of copies, the node's pid)."""
    fd, memory, store, parent = int(argv[0]), int(argv[1]), argv[2], int(argv[3])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the node; it kills us
    os.nice(_NICENESS)  # MuJoCo compiles on every core: the node's threads go first
    _die_with(parent)
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    _serve(Connection(fd), AssetStore(store))
    return 0
