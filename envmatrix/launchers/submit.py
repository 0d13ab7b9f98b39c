"""Batch scripts for `envmatrix submit`: pure rendering from launchers/*.tmpl, and job-id parsing.

Templates use string.Template ``$name`` placeholders; every value that reaches
a shell line is shlex-quoted, and the envmatrix command is one ``shlex.join``.
Submission itself goes through execution.processes.run_capture (shell=False).
"""

from __future__ import annotations

import re
import shlex
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from envmatrix.errors import ConfigError
from envmatrix.paths import templates_dir

TEMPLATE_DIR = templates_dir()
SCHEDULERS = {"slurm": ("sbatch.sh.tmpl", "sbatch", "#SBATCH"), "pbs": ("pbs.sh.tmpl", "qsub", "#PBS")}
VERBS = ("sweep", "bisect", "search")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.+-]+$")
_WALLTIME = re.compile(r"^(\d+-)?\d{1,3}(:\d{2}){0,2}$")


@dataclass(frozen=True)
class BatchSpec:
    scheduler: str
    envmatrix_args: tuple[str, ...]  # e.g. ("sweep", "conf=aws_ofi", "launcher=srun")
    python: str
    workdir: str
    nodes: int = 1
    ntasks_per_node: int = 1
    gpus_per_node: Optional[int] = None
    time: str = "01:00:00"
    job_name: str = "envmatrix"
    output: str = "envmatrix-%j.out"
    account: Optional[str] = None
    queue: Optional[str] = None  # Slurm partition / PBS queue
    directives: tuple[str, ...] = field(default_factory=tuple)  # raw extra directive lines' options


def check(spec: BatchSpec) -> None:
    where = "envmatrix submit"
    if spec.scheduler not in SCHEDULERS:
        raise ConfigError(f"{where} --scheduler: {spec.scheduler!r} not allowed; allowed: {', '.join(SCHEDULERS)}")
    if not spec.envmatrix_args or spec.envmatrix_args[0] not in VERBS:
        got = spec.envmatrix_args[0] if spec.envmatrix_args else "nothing"
        raise ConfigError(f"{where}: the command to run is {got!r}; allowed: {', '.join(VERBS)} followed by its arguments")
    for key, value in (("--nodes", spec.nodes), ("--ntasks-per-node", spec.ntasks_per_node)):
        if value < 1:
            raise ConfigError(f"{where} {key}: {value} not allowed; allowed: an integer >= 1")
    if spec.gpus_per_node is not None and spec.gpus_per_node < 0:
        raise ConfigError(f"{where} --gpus-per-node: {spec.gpus_per_node} not allowed; allowed: an integer >= 0")
    if not _WALLTIME.match(spec.time) or any(int(part) > 59 for part in spec.time.split("-")[-1].split(":")[1:]):
        raise ConfigError(f"{where} --time: {spec.time!r} not allowed; allowed: [D-]HH:MM:SS, e.g. 01:00:00")
    if spec.scheduler == "pbs" and pbs_walltime(spec.time) == "00:00:00":  # Slurm reads 0 as no limit; PBS has none
        raise ConfigError(f"{where} --time: {spec.time!r} is a walltime of zero for PBS, which has no 'no limit'; "
                          "allowed: a time above zero, e.g. 01:00:00")
    for key, value in (("--job-name", spec.job_name), ("--account", spec.account)):
        if value is not None and not _SAFE_NAME.match(value):
            raise ConfigError(f"{where} {key}: {value!r} not allowed; allowed: letters, digits and _ . + -")
    if spec.queue is not None:
        _check_queue(spec.scheduler, spec.queue)
    if spec.output is not None and ("\n" in spec.output or "\r" in spec.output):  # the rest would be read as directives
        raise ConfigError(f"{where} --output: {spec.output!r} spans lines; allowed: one file name such as envmatrix-%j.out")
    for line in spec.directives:
        if "\n" in line or "\r" in line:
            raise ConfigError(f"{where} --directive: {line!r} spans lines; allowed: one option per --directive")
        if not line.strip():
            raise ConfigError(f"{where} --directive: {line!r} is empty; allowed: one scheduler option (what follows "
                              "#SBATCH or #PBS on its line)")
        try:
            shlex.split(line)
        except ValueError as exc:  # render re-quotes its words
            raise ConfigError(f"{where} --directive: {line!r}: {exc}; allowed: one scheduler option whose quotes "
                              "close, e.g. --comment='two words'") from None


def _check_queue(scheduler: str, queue: str) -> None:
    """Slurm's --partition takes a comma list (the job runs in whichever partition starts it first, as sites split
    GPU nodes into gpu,gpu-preempt); PBS's -q takes one queue."""
    names = queue.split(",") if scheduler == "slurm" else [queue]
    if not all(_SAFE_NAME.match(name) for name in names):
        what = ("partition names of letters, digits and _ . + -, one or a comma list (gpu,debug)"
                if scheduler == "slurm" else "one queue name of letters, digits and _ . + -")
        raise ConfigError(f"envmatrix submit --queue: {queue!r} not allowed; allowed: {what}")


def pbs_walltime(time: str) -> str:
    """--time, read as Slurm reads it (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S), as PBS's HH:MM:SS: PBS takes no days
    and reads a lone number as seconds, so ``1-00:00:00`` would be refused by qsub and ``90`` be 90 s, not 90 min."""
    days, _, clock = time.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    if days:  # D-H, D-H:M, D-H:M:S
        h, m, s = (parts + [0, 0])[:3]
    else:  # M, M:S, H:M:S
        h, m, s = parts if len(parts) == 3 else [0, *parts, 0][:3]
    total = (int(days or 0) * 24 + h) * 3600 + m * 60 + s
    return f"{total // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}"


def render(spec: BatchSpec, template_dir: Path = TEMPLATE_DIR) -> str:
    """The batch script text (pure apart from reading the template)."""
    check(spec)
    name, _, prefix = SCHEDULERS[spec.scheduler]
    template = string.Template((template_dir / name).read_text())
    extra = []
    if spec.scheduler == "slurm":
        if spec.gpus_per_node is not None:
            extra.append(f"--gpus-per-node={spec.gpus_per_node}")
        if spec.account:
            extra.append(f"--account={spec.account}")
        if spec.queue:
            extra.append(f"--partition={spec.queue}")
    else:
        if spec.account:
            extra.append(f"-A {spec.account}")
        if spec.queue:
            extra.append(f"-q {spec.queue}")
    extra += [shlex.join(shlex.split(d)) for d in spec.directives]
    return template.substitute(
        verb=spec.envmatrix_args[0],
        job_name=spec.job_name,
        nodes=spec.nodes,
        ntasks_per_node=spec.ntasks_per_node,
        select_extra=f":ngpus={spec.gpus_per_node}" if spec.gpus_per_node is not None else "",
        time=spec.time if spec.scheduler == "slurm" else pbs_walltime(spec.time),
        output=shlex.quote(spec.output),
        directives="\n".join(f"{prefix} {d}" for d in extra),
        workdir=shlex.quote(spec.workdir),
        command=shlex.join([spec.python, "-m", "envmatrix", *spec.envmatrix_args]),
    )


def submit_argv(scheduler: str, script_path: str) -> list[str]:
    return [SCHEDULERS[scheduler][1], script_path]


def parse_job_id(scheduler: str, stdout: str) -> Optional[str]:
    """'Submitted batch job 1234' (sbatch) or '1234.pbs01' (qsub) -> the job id."""
    text = stdout.strip()
    if scheduler == "slurm":
        m = re.search(r"Submitted batch job (\d+)", text) or re.fullmatch(r"(\d+)(;\S+)?", text)
    else:
        m = re.fullmatch(r"(\d+(?:\[\])?\.\S+|\d+)", text.splitlines()[-1].strip() if text else "")
    return m.group(1) if m else None
