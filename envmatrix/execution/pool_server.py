"""Warm rank server: ``python -m envmatrix.execution.pool_server``.

Imports torch and the probe once, never touches CUDA/NCCL or starts threads,
then per request forks a child that takes the run's whole environment before
any CUDA/NCCL call (NCCL reads its variables at communicator init, so they
take effect in the child). Protocol on stdin/stdout, one JSON line each:
request {argv, env, log_path, cwd} -> {"pid": P} at fork -> {"pid": P, "status": S}
when it ends (S as Popen's returncode: negative = signal).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def _say(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def _child(req: dict) -> None:
    try:
        # Own process group (the driver kills it on timeout); die with the server.
        os.setpgid(0, 0)
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        devnull = os.open(os.devnull, os.O_RDONLY)
        log = os.open(req["log_path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(devnull, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        if req.get("cwd"):
            os.chdir(req["cwd"])
        # Whole replacement, so nothing of the server's env leaks; putenv reaches C getenv (NCCL).
        os.environ.clear()
        os.environ.update(req["env"])
        sys.argv = list(req["argv"][2:]) or [""]
        from envmatrix.probes import rank_main

        rank_main.START_MODE = "pooled"
        code = rank_main.main()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException as exc:  # noqa: BLE001 - the child must never return into the server loop
        try:
            os.write(2, f"envmatrix pooled child: {type(exc).__name__}: {exc}\n".encode())
        except OSError:
            pass
        code = 1
    os._exit(code)


def serve() -> int:
    import torch  # noqa: F401 - the point of the pool: imported once, not per run
    import torch.distributed  # noqa: F401

    from envmatrix.probes import bench_engine, rank_main  # noqa: F401

    _say({"ready": os.getpid()})
    for line in sys.stdin:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(req)
        try:
            os.setpgid(pid, pid)  # also here: no window where the driver's killpg misses
        except OSError:
            pass
        _say({"pid": pid})
        _, status = os.waitpid(pid, 0)
        _say({"pid": pid, "status": os.waitstatus_to_exitcode(status)})
    return 0


if __name__ == "__main__":
    sys.exit(serve())
