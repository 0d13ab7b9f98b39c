"""Warm rank server: ``python -m envmatrix.execution.pool_server``.

Imports torch and the rank package once, never touches CUDA/NCCL or starts threads, and keeps one child forked ahead
(through execution.processes, the one module that starts processes) that waits for the next run: the fork is off the
run's critical path, and the waiting child has imported or prepared nothing that depends on a run's env (it is a
fresh fork of this server, never a former rank). Per request that child takes the run's whole environment before any
CUDA/NCCL call (NCCL reads its variables at communicator init, so they take effect in the child) and runs the
built-in probe's rank. Protocol on stdin/stdout, one JSON line each:
request {argv, env, log_path, cwd} -> {"pid": P} once the child has it -> {"pid": P, "status": S} when its rank
has returned (S as Popen's returncode: negative = signal). The status is said when the child reports its code,
before its process has finished tearing down (a CUDA context takes ~0.15 s); the server still reaps every child,
while it already serves the next request, and a child killed before it reported is reported with its signal.

Where an NVIDIA driver is present (``/dev/nvidiactl``; ``ENVMATRIX_POOL_CUDA_PREINIT=0`` turns it off, ``=1`` forces
it), the child for the next run is forked as soon
as a NCCL run without bench starts, and makes its CUDA context on that run's device under that run's env less the
variables read only after the context exists (``rank.main.prepare_cuda``); the next run gets it only if its own
env equals that on every other variable and puts it on the same device, else the child is discarded and a fresh
one runs it. So no run's CUDA sees a variable of another run's: the env a context was made under is the one the
run would have made it under.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
from typing import Optional

from envmatrix.execution.processes import WaitingChild, fork_waiting_call

# A child still making its CUDA context this long after the next run asked for it is not used (a fresh child is).
PREPARE_TIMEOUT_S = 30.0


def _say(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def _run_rank(request: dict) -> int:
    from envmatrix.rank import main as rank_main

    sys.argv = list(request["argv"][2:]) or [""]
    rank_main.START_MODE = "pooled"
    import torch.distributed

    # torch.distributed read TORCH_DISTRIBUTED_DEBUG at import, in this server under the pool's env: read it again
    # (a server per value of the variables read at import costs more: pool.IMPORT_TIME_VARS)
    if hasattr(torch.distributed, "set_debug_level_from_env"):
        torch.distributed.set_debug_level_from_env()
    return rank_main.main()


class _Reaper:
    """Children whose result was said but whose process may still be ending: reaped when they are done (a pidfd
    each), so the next run starts meanwhile and none is left a zombie."""

    def __init__(self) -> None:
        self.ending: dict[int, int] = {}  # pidfd -> pid

    def add(self, pid: int) -> None:
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):  # no pidfd here: wait for it now
            os.waitpid(pid, 0)
            return
        self.ending[fd] = pid

    def reap(self, fd: int) -> None:
        pid = self.ending.pop(fd)
        os.close(fd)
        os.waitpid(pid, 0)

    def reap_all(self) -> None:
        for fd in list(self.ending):
            self.reap(fd)


def _status_of(child: WaitingChild) -> int:
    """The child's code as it reported it, else (it died first) its exit status; reaped in the latter case only."""
    raw = b""
    while True:
        chunk = os.read(child.result_fd, 64)
        if not chunk:
            break
        raw += chunk
        if raw.endswith(b"\n"):
            break
    os.close(child.result_fd)
    if raw.strip():
        return int(raw)
    _, status = os.waitpid(child.pid, 0)
    return os.waitstatus_to_exitcode(status)


class _Spare:
    """The child forked ahead for the next run, and the env it prepared CUDA under (None: it prepared nothing)."""

    def __init__(self, prepared_for: Optional[dict] = None) -> None:
        from envmatrix.rank import main as rank_main

        self.prepared_for = prepared_for
        prepare = None if prepared_for is None else (lambda: rank_main.prepare_cuda(prepared_for))
        self.child = fork_waiting_call(_run_rank, "envmatrix pooled child", prepare)

    def fits(self, env: dict) -> bool:
        """A child that prepared nothing fits every run; one that made a CUDA context fits only a run whose env
        that context could depend on is the same, on the same device."""
        if self.prepared_for is None:
            return True
        from envmatrix.rank.main import cuda_device_of, cuda_init_env

        same = (cuda_device_of(env) == cuda_device_of(self.prepared_for)
                and cuda_init_env(env) == cuda_init_env(self.prepared_for))
        return same and self.child.prepared(PREPARE_TIMEOUT_S)

    def let_go(self, reaper: "_Reaper") -> None:
        """Discard it, reaped without waiting here: one that prepares something may be inside CUDA, so it is killed
        (its own group) rather than left to finish that first."""
        self.child.discard()
        os.close(self.child.result_fd)
        if self.prepared_for is not None:
            try:
                os.killpg(self.child.pid, signal.SIGKILL)
            except OSError:
                pass
        reaper.add(self.child.pid)


def cuda_preinit_enabled(environ: "os._Environ[str] | dict[str, str]") -> bool:
    """Making the next child's CUDA context ahead is on by default on a GPU host: on one H100 it took the 8-setup
    round from 3.38x to 3.67x the naive loop at 1x1 and from 2.73x to 3.62x at 2x1, with NCCL's own log showing each
    run's env in the child (benchmarks/emulated_hosts_gpu_h100.md, call 8). Off where no driver is present: there
    every spare would fail cuInit and be discarded."""
    value = environ.get("ENVMATRIX_POOL_CUDA_PREINIT")
    if value is not None:
        return value == "1"
    return os.path.exists("/dev/nvidiactl")


def serve() -> int:
    import torch  # noqa: F401 - the point of the pool: imported once, not per run
    import torch.distributed  # noqa: F401

    from envmatrix.rank import collective_timer, main as rank_main  # noqa: F401 - imported once too

    _say({"ready": os.getpid()})
    preinit = cuda_preinit_enabled(os.environ)
    spare: Optional[_Spare] = _Spare()
    running: Optional[WaitingChild] = None
    reaper = _Reaper()
    pending = b""
    while True:
        watched = [0] + ([running.result_fd] if running else []) + list(reaper.ending)
        for fd in select.select(watched, [], [])[0]:
            if fd == 0:
                chunk = os.read(0, 65536)
                if not chunk:  # the driver closed the pipe: done (a running child dies with us: PDEATHSIG)
                    if spare is not None:
                        spare.let_go(reaper)
                    reaper.reap_all()
                    return 0
                pending += chunk
            elif running is not None and fd == running.result_fd:
                status = _status_of(running)
                _say({"pid": running.pid, "status": status})
                if _alive(running.pid):
                    reaper.add(running.pid)
                running = None
                spare = spare or _Spare()
            else:
                reaper.reap(fd)
        while b"\n" in pending and running is None:
            line, pending = pending.split(b"\n", 1)
            req = json.loads(line)
            if spare is not None and not spare.fits(req["env"]):
                spare.let_go(reaper)
                spare = None
            child = (spare or _Spare()).child
            try:
                child.start(req)
            except OSError:  # the child forked ahead died before its run (killed, OOM): a fresh one runs it
                os.close(child.result_fd)
                reaper.add(child.pid)
                child = _Spare().child
                child.start(req)
            _say({"pid": child.pid})
            running = child
            spare = _Spare(req["env"]) if preinit and rank_main.cuda_device_of(req["env"]) is not None else None


def _alive(pid: int) -> bool:
    """Not yet reaped by us (a child that reported its code and then exited is still ours to reap)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == 0


if __name__ == "__main__":
    sys.exit(serve())
