"""``envmatrix submit``: render a batch script (sbatch or PBS) that runs a sweep/bisect/search
inside an allocation, and print it or submit it."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from envmatrix.errors import EnvmatrixError

EXAMPLES = """examples:
  envmatrix submit --nodes 2 --ntasks-per-node 4 --gpus-per-node 4 --print -- sweep conf=aws_ofi launcher=srun
  envmatrix submit --scheduler pbs --nodes 2 --queue debug --account MyProj -- sweep conf=aws_ofi launcher=mpiexec
"""


class SubmitError(EnvmatrixError):
    exit_code = 1


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "submit",
        help="render a batch script (sbatch, PBS qsub) that runs a sweep/bisect/search in an allocation",
        description="Render a batch script from launchers/*.tmpl that runs `envmatrix sweep|bisect|search ...` inside "
        "the allocation it asks for; submit it (sbatch/qsub) or print it with --print.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--scheduler", default="slurm", choices=("slurm", "pbs"), help="batch system (default slurm)")
    p.add_argument("--nodes", type=int, default=1, help="nodes to allocate (default 1)")
    p.add_argument("--ntasks-per-node", type=int, default=1, help="tasks (ranks) per node to allocate (default 1)")
    p.add_argument("--gpus-per-node", type=int, default=None, help="GPUs per node to allocate")
    p.add_argument("--time", default="01:00:00", help="wall time, [D-]HH:MM:SS (default 01:00:00)")
    p.add_argument("--job-name", default="envmatrix", help="job name (default envmatrix)")
    p.add_argument("--account", default=None, help="account / project to charge")
    p.add_argument("--queue", default=None, help="Slurm partition or PBS queue")
    p.add_argument("--output", default=None, help="job output file (default envmatrix-%%j.out / envmatrix.out)")
    p.add_argument("--directive", action="append", default=[], metavar="OPT", help="extra directive option (repeatable)")
    p.add_argument("--script", default=None, metavar="PATH", help="where to write the script (default: a temp file)")
    p.add_argument("--print", dest="print_only", action="store_true", help="print the script; submit nothing")
    p.add_argument("command", nargs=argparse.REMAINDER, help="sweep|bisect|search and its arguments (after --)")
    p.set_defaults(func=cmd_submit)


def cmd_submit(args: argparse.Namespace) -> int:
    from envmatrix.execution.processes import run_capture
    from envmatrix.launchers.submit import BatchSpec, parse_job_id, render, submit_argv

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    spec = BatchSpec(
        scheduler=args.scheduler,
        envmatrix_args=tuple(command),
        python=sys.executable,
        workdir=os.getcwd(),
        nodes=args.nodes,
        ntasks_per_node=args.ntasks_per_node,
        gpus_per_node=args.gpus_per_node,
        time=args.time,
        job_name=args.job_name,
        output=args.output or ("envmatrix-%j.out" if args.scheduler == "slurm" else "envmatrix.out"),
        account=args.account,
        queue=args.queue,
        directives=tuple(args.directive),
    )
    text = render(spec)
    if args.print_only:
        sys.stdout.write(text)
        return 0
    path = args.script
    if path is None:
        fd, path = tempfile.mkstemp(prefix="envmatrix-", suffix=".sh", dir=os.getcwd())
        os.close(fd)
    with open(path, "w") as fh:
        fh.write(text)
    done = run_capture(submit_argv(args.scheduler, path), timeout_s=60.0)
    if done.returncode != 0:
        first = (done.stderr or done.stdout).strip().splitlines()
        raise SubmitError(f"{submit_argv(args.scheduler, path)[0]} failed (exit {done.returncode}): "
                          f"{first[0] if first else 'no output'}; script kept at {path}")
    job = parse_job_id(args.scheduler, done.stdout)
    print(f"submitted job {job or '?'}; script {path}")
    return 0
