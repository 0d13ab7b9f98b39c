"""Warm probe pool: rank processes forked from servers that already imported torch.

``WarmPool.start`` is a drop-in for ``run_group``'s process start: a rank of
the built-in probe gets a forked child of an idle server (``pooled``) started
under the rank's own loader values (a setup that prepends LD_LIBRARY_PATH gets
servers of its own, shared by every run with the same values); a rank that
changes what runs inside the server's own start (LD_PRELOAD, LD_AUDIT) or runs
another command is started cold with Popen exactly as without the pool. Servers
run in their own session with PDEATHSIG, so neither they nor their children
outlive the driver.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Mapping, Optional, Sequence

from envmatrix import interrupts
from envmatrix.boundary import ProcessSpec
from envmatrix.execution.processes import kill_tree, popen_piped, popen_spec

# Read once when the server imported torch (c10's logging, the OpenMP runtime under it): a forked child keeps the
# server's values whatever its own env says. Measured (2 cores, gloo): TORCH_CPP_LOG_LEVEL=INFO with
# TORCH_DISTRIBUTED_DEBUG=DETAIL left a pooled rank0.log empty where a cold rank logs 69 lines; OMP_NUM_THREADS=1 set
# in a child of a server started without it left torch.get_num_threads() at 2 (1 when started cold). Runs setting
# them are rare, so servers of their own cost little. Not TORCH_DISTRIBUTED_DEBUG (also read at import of
# torch.distributed): sweeps vary it on gloo, and servers per value made a 3-setup sweep 7.2-8.0 s instead of 2.7 s
# (6.3 s without the pool); a pooled child should re-read it instead (pool_server, not done here).
IMPORT_TIME_VARS = ("TORCH_CPP_LOG_LEVEL", "OMP_NUM_THREADS")
# What the dynamic loader (or the interpreter, or torch's import) resolved when the server started:
# a run that changes one of these must not inherit the server's choice (it gets servers of its own values).
LOADER_VARS = (
    "LD_LIBRARY_PATH", "LD_PRELOAD", "LD_AUDIT", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN",
    "NCCL_ENV_PLUGIN", "NCCL_NET_PLUGIN_PATH", "NCCL_LIB", "PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH",
) + IMPORT_TIME_VARS
# Of those, what runs code inside the server's own start (a preloaded library's constructor, an audit module): a
# forked child inherits that state without the threads it may have started, so such a run starts cold.
START_CODE_VARS = ("LD_PRELOAD", "LD_AUDIT")
POOLED_MODULE = "envmatrix.rank.main"
# Idle servers kept beyond the ones a run asks for: servers of other loader values are closed first, oldest first.
MAX_SERVERS = 16


def loader_key(env: Mapping[str, str]) -> tuple[Optional[str], ...]:
    """What a server resolved at start: only runs with the same values may fork from it."""
    return tuple(env.get(var) for var in LOADER_VARS)


def likely_ranks(environ: Mapping[str, str]) -> int:
    """Ranks the first runs of a sweep most likely need, known before any config is read: one per
    visible GPU (device nodes, no nvidia-smi), else 2 (the smallest multi-rank grid on CPU)."""
    import glob

    from envmatrix.execution.hostinfo import visible_count

    gpus = visible_count(len(glob.glob("/dev/nvidia[0-9]*")), environ)
    return gpus or 2


def cold_reason(spec: ProcessSpec, base_env: Mapping[str, str], python: str) -> Optional[str]:
    """Why this rank cannot run in a pooled child (None: it can)."""
    if tuple(spec.argv) != (python, "-m", POOLED_MODULE):
        return f"argv {' '.join(spec.argv[:3])} is not {python} -m {POOLED_MODULE}"
    for var in START_CODE_VARS:
        if spec.env.get(var) != base_env.get(var):
            return f"{var} differs from the pool's ({spec.env.get(var)!r} vs {base_env.get(var)!r})"
    return None


def server_env(base_env: Mapping[str, str], rank_env: Mapping[str, str]) -> dict[str, str]:
    """The env a server for this rank starts under: the pool's base env with the rank's loader values, and nothing
    else of the rank's (a setup's other variables must not reach the server's import, which every later child of it
    inherits)."""
    env = {k: v for k, v in base_env.items() if k not in LOADER_VARS}
    env.update({var: rank_env[var] for var in LOADER_VARS if var in rank_env})
    return env


class PooledChild:
    """A forked rank as seen by run_group: the Popen subset it uses (pid, poll, wait)."""

    def __init__(self, server: "_Server", pid: int) -> None:
        self.server, self.pid, self.returncode = server, pid, None

    def _take(self, timeout: Optional[float]) -> Optional[int]:
        if self.returncode is None:
            msg = self.server.read(timeout)
            if msg is not None:
                self.returncode = int(msg.get("status", -9))
                self.server.busy = False
        return self.returncode

    def poll(self) -> Optional[int]:
        return self._take(0)

    def exit_fd(self) -> int:
        """Readable when the server reports this child's exit (processes.wait_for_an_exit selects on it)."""
        return self.server.proc.stdout.fileno()  # type: ignore[union-attr]

    def wait(self, timeout: Optional[float] = None) -> int:
        rc = self._take(timeout)
        if rc is None:
            raise subprocess.TimeoutExpired("pooled rank", timeout or 0)
        return rc


class _Server:
    def __init__(self, python: str, env: Mapping[str, str]) -> None:
        self.proc = popen_piped([python, "-m", "envmatrix.execution.pool_server"], env)
        self._buf = b""
        self.loader = loader_key(env)
        self.ready = False
        self.busy = False

    def read(self, timeout: Optional[float]) -> Optional[dict]:
        # Own line buffer over the raw fd: a buffered reader could swallow the exit line
        # together with the pid line, and select() would then never report it.
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        while b"\n" not in self._buf:
            if timeout is not None and not select.select([fd], [], [], timeout)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:  # server died: its children died with it (PDEATHSIG)
                self.close()
                return {"status": -9}
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def wait_ready(self, timeout_s: float, interruptible: bool = True) -> bool:
        """Whether the server has imported torch, waiting at most ``timeout_s`` (0: only look); a noted Ctrl-C ends
        the wait (KeyboardInterrupt). False also when it died first."""
        deadline = time.monotonic() + timeout_s
        while not self.ready:
            if interruptible:
                interrupts.raise_pending()  # a worker thread's run: the signal's KeyboardInterrupt never comes here
            msg = self.read(max(0.0, min(0.1, deadline - time.monotonic())))
            if msg is not None:
                if "ready" not in msg:  # it died while importing (read closed it)
                    return False
                self.ready = True
            elif time.monotonic() >= deadline:
                return False
        return True

    def fork(self, spec: ProcessSpec) -> PooledChild:
        if not self.wait_ready(0, interruptible=False):
            raise OSError("pool server is not ready (still importing torch, or died doing so)")
        req = {"argv": list(spec.argv), "env": dict(spec.env), "log_path": spec.log_path, "cwd": spec.cwd}
        self.proc.stdin.write((json.dumps(req) + "\n").encode())  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        msg = self.read(None)
        if "pid" not in msg or "status" in msg:
            raise OSError("pool server died before forking")
        self.busy = True
        return PooledChild(self, int(msg["pid"]))

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.proc.returncode is None:  # reaped already (a second close): its pid may be another's by now
            kill_tree(self.proc.pid)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()  # type: ignore[union-attr]
            except (OSError, ValueError):
                pass


class WarmPool:
    """Idle servers shared by concurrent runs (packing); thread-safe."""

    def __init__(self, base_env: Mapping[str, str], python: str = sys.executable) -> None:
        self.base_env, self.python = dict(base_env), python
        self._idle: list[_Server] = []
        self._all: list[_Server] = []
        self._lock = threading.Lock()
        self.started = {"pooled": 0, "cold": 0}
        # PR_SET_PDEATHSIG fires when the *thread* that started a server exits: packed runs
        # execute in short-lived worker threads, so servers are started from this long-lived one.
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix="envmatrix-pool")

    def _spawn(self, env: Mapping[str, str]) -> "_Server":
        return self._spawner.submit(_Server, self.python, env).result()

    @classmethod
    def prestart(cls, environ: Mapping[str, str], n: int, python: str = sys.executable) -> "WarmPool":
        """A pool whose n servers start importing torch now, while the driver composes the config,
        plans and opens the store (the servers touch no GPU; they are killed with the pool)."""
        pool = cls(environ, python)
        pool.warm(n)
        return pool

    def rebase(self, base_env: Mapping[str, str]) -> None:
        """The env ranks actually inherit (known once the config is resolved, e.g. hermetic):
        servers started under other loader values are then never chosen."""
        self.base_env = dict(base_env)

    def warm(self, n: int, env: Optional[Mapping[str, str]] = None) -> None:
        """Have n idle servers fit for env (default: the pool's base env), starting the missing ones now."""
        env = self.base_env if env is None else env
        key = loader_key(env)
        with self._lock:
            missing = n - sum(s.loader == key and s.alive for s in self._idle)
            for _ in range(missing):
                server = self._spawn(env)
                self._idle.append(server)
                self._all.append(server)
            self._evict_beyond(max(MAX_SERVERS, n), key)

    def _acquire(self, env: Mapping[str, str]) -> _Server:
        key = loader_key(env)
        with self._lock:
            self._idle = [s for s in self._idle if s.alive]
            for server in reversed(self._idle):
                if server.loader == key:
                    self._idle.remove(server)
                    return server
            server = self._spawn(env)
            self._all.append(server)
            self._evict_beyond(MAX_SERVERS, key)
            return server

    def _evict_beyond(self, limit: int, key: tuple) -> None:
        """Close idle servers of other loader values, oldest first, while more than ``limit`` are alive."""
        alive = [s for s in self._all if s.alive]
        for server in [s for s in self._idle if s.loader != key][: max(0, len(alive) - limit)]:
            self._idle.remove(server)
            self._all.remove(server)
            server.close()

    def release(self, server: _Server) -> None:
        with self._lock:
            if server.alive and not server.busy:
                self._idle.append(server)

    def start(self, spec: ProcessSpec, log: IO[bytes], server: Optional[_Server] = None):
        """run_group's starter: a pooled child of ``server`` (one ``run_group`` reserved for this rank and saw ready)
        if the rank allows it, else cold. Called while Ctrl-C is deferred (processes.deferred_interrupt): it never
        waits for a server's import."""
        if server is not None and cold_reason(spec, self.base_env, self.python) is None:
            try:
                child = server.fork(spec)
            except (OSError, ValueError, TypeError):
                server.close()
            else:
                self.started["pooled"] += 1
                return child
        self.started["cold"] += 1
        return popen_spec(spec, log)

    def run_group(self, specs: Sequence[ProcessSpec], **kw):
        from envmatrix.execution.processes import run_group

        children: list = []
        # A server per pooled rank, reserved before any rank starts: the servers this run lacks start now, side by
        # side (started one per rank as each is forked, their torch imports would follow one another: a 2x4 run's
        # first config waited for 8 imports in a row), and their imports are waited for here, where Ctrl-C may
        # stop the wait, within the run's timeout.
        reserved: dict[int, _Server] = {}
        try:
            for i, spec in enumerate(specs):
                if cold_reason(spec, self.base_env, self.python) is None:
                    reserved[i] = self._acquire(server_env(self.base_env, spec.env))
            self._await_ready(reserved, float(kw.get("timeout_s", 60.0)), kw.get("interruptible", True))
            order = {id(spec): i for i, spec in enumerate(specs)}

            def start(spec: ProcessSpec, log: IO[bytes]):
                child = self.start(spec, log, reserved.pop(order[id(spec)], None))
                children.append(child)
                return child

            return run_group(specs, start=start, **kw)
        finally:
            for server in reserved.values():  # not used (interrupted, or the group ended before it started them)
                self.release(server)
            for child in children:
                if isinstance(child, PooledChild):
                    if child.returncode is None:
                        kill_tree(child.pid)
                        try:
                            child.wait(timeout=10)
                        except subprocess.TimeoutExpired:
                            child.server.close()
                    self.release(child.server)

    def _await_ready(self, reserved: dict[int, _Server], timeout_s: float, interruptible: bool) -> None:
        """Wait for the reserved servers to finish importing torch, at most ``timeout_s`` (the run's timeout) in all;
        one still importing then is closed and dropped from ``reserved``, so its rank starts cold. A server hung in
        its start (a setup's PYTHONPATH with a sitecustomize that blocks) held the run past its timeout before, and
        Ctrl-C with it: the rank's start waited for the server's ready line with Ctrl-C deferred."""
        deadline = time.monotonic() + timeout_s
        for i, server in list(reserved.items()):
            if server.wait_ready(max(0.0, deadline - time.monotonic()), interruptible):
                continue
            del reserved[i]
            with self._lock:
                if server in self._all:
                    self._all.remove(server)
            server.close()

    def close(self) -> None:
        with self._lock:
            servers, self._all, self._idle = self._all, [], []
        for server in servers:
            server.close()
        self._spawner.shutdown(wait=False)

    def __enter__(self) -> "WarmPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
