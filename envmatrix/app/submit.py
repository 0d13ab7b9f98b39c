"""``envmatrix submit``'s lifecycle: render a batch script (sbatch or PBS) that runs a sweep/bisect/search inside an
allocation, and submit it (or only render it)."""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Optional

from envmatrix import paths as em_paths, values
from envmatrix.errors import ConfigError, EnvmatrixError


class SubmitError(EnvmatrixError):
    exit_code = 1


@dataclass(frozen=True)
class SubmitRequest:
    command: tuple[str, ...] = ()  # the envmatrix command the job runs, e.g. ("sweep", "conf=aws_ofi")
    scheduler: str = "slurm"
    nodes: int = 1
    ntasks_per_node: int = 1
    gpus_per_node: Optional[int] = None
    time: str = "01:00:00"
    job_name: str = "envmatrix"
    account: Optional[str] = None
    queue: Optional[str] = None
    output: Optional[str] = None  # None: the scheduler's envmatrix-%j.out / envmatrix.out
    directive: tuple[str, ...] = ()  # extra directive options
    script: Optional[str] = None  # where to write the script (None: a temp file in the cwd)
    print_only: bool = False  # render, submit nothing


@dataclass(frozen=True)
class SubmitResult:
    script_text: str
    script_path: Optional[str] = None  # None when only rendered
    job_id: Optional[str] = None


def render_script(request: SubmitRequest) -> str:
    from envmatrix.launchers.submit import BatchSpec, render

    command = list(request.command)
    if command and command[0] == "--":
        command = command[1:]
    return render(BatchSpec(
        scheduler=request.scheduler,
        envmatrix_args=tuple(command),
        python=sys.executable,
        workdir=os.getcwd(),
        nodes=request.nodes,
        ntasks_per_node=request.ntasks_per_node,
        gpus_per_node=request.gpus_per_node,
        time=request.time,
        job_name=request.job_name,
        output=request.output or ("envmatrix-%j.out" if request.scheduler == "slurm" else "envmatrix.out"),
        account=request.account,
        queue=request.queue,
        directives=tuple(request.directive),
    ))


def submit(request: SubmitRequest) -> SubmitResult:
    from envmatrix.execution.processes import run_capture
    from envmatrix.launchers.submit import parse_job_id, submit_argv

    if request.output is not None and not request.output.strip():
        raise ConfigError(f"envmatrix submit --output {request.output!r}: empty; allowed: a file name such as "
                          "envmatrix-%j.out, or leave --output out")
    text = render_script(request)
    if request.print_only:
        return SubmitResult(text)
    path = request.script
    if path is not None:
        values.output_file("--script", path, "script")
        try:
            em_paths.make_parent(path)
        except OSError as exc:  # a folder that cannot be made (under /proc, a read-only mount as root)
            raise ConfigError(f"envmatrix submit --script {path!r}: its folder cannot be made ({exc.strerror}); "
                              "allowed: a file path whose folders are directories (they are made when missing)") from None
    if path is None:
        fd, path = tempfile.mkstemp(prefix="envmatrix-", suffix=".sh", dir=os.getcwd())
        os.close(fd)
    with open(path, "w") as fh:
        fh.write(text)
    argv = submit_argv(request.scheduler, path)
    done = run_capture(argv, timeout_s=60.0)
    if done.returncode != 0:
        first = (done.stderr or done.stdout).strip().splitlines()
        raise SubmitError(f"{argv[0]} failed (exit {done.returncode}): {first[0] if first else 'no output'}; script kept at {path}")
    return SubmitResult(text, path, parse_job_id(request.scheduler, done.stdout))
