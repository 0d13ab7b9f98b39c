"""Warm rank server: ``python -m envmatrix.execution.pool_server``.

Imports torch and the rank package once, never touches CUDA/NCCL or starts threads,
then per request forks a child (through execution.processes, the one module that starts
processes) that takes the run's whole environment before any CUDA/NCCL call (NCCL reads
its variables at communicator init, so they take effect in the child) and runs the
built-in probe's rank. Protocol on stdin/stdout, one JSON line each:
request {argv, env, log_path, cwd} -> {"pid": P} at fork -> {"pid": P, "status": S}
when it ends (S as Popen's returncode: negative = signal).
"""

from __future__ import annotations

import json
import os
import sys

from envmatrix.execution.processes import fork_call_in_group


def _say(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def serve() -> int:
    import torch  # noqa: F401 - the point of the pool: imported once, not per run
    import torch.distributed  # noqa: F401

    from envmatrix.rank import collective_timer, main as rank_main  # noqa: F401 - collective_timer: imported once too

    _say({"ready": os.getpid()})
    for line in sys.stdin:
        req = json.loads(line)

        def run_rank(argv: list = req["argv"]) -> int:
            sys.argv = list(argv[2:]) or [""]
            rank_main.START_MODE = "pooled"
            return rank_main.main()

        pid = fork_call_in_group(run_rank, req["env"], req["log_path"], req.get("cwd"), "envmatrix pooled child")
        _say({"pid": pid})
        _, status = os.waitpid(pid, 0)
        _say({"pid": pid, "status": os.waitstatus_to_exitcode(status)})
    return 0


if __name__ == "__main__":
    sys.exit(serve())
