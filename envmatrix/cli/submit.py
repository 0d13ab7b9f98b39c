"""``envmatrix submit``: render a batch script (sbatch or PBS) that runs a sweep/bisect/search
inside an allocation, and print it or submit it."""

from __future__ import annotations

import argparse
import sys

from envmatrix.cli.common import add_command, request_from

EXAMPLES = """examples:
  envmatrix submit --nodes 2 --ntasks-per-node 4 --gpus-per-node 4 --print -- sweep conf=aws_ofi launcher=srun
  envmatrix submit --scheduler pbs --nodes 2 --queue debug --account MyProj -- sweep conf=aws_ofi launcher=mpiexec
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "submit", "render a batch script (sbatch, PBS qsub) that runs a sweep/bisect/search in an allocation",
                    "Render a batch script from launchers/*.tmpl that runs `envmatrix sweep|bisect|search ...` inside "
                    "the allocation it asks for; submit it (sbatch/qsub) or print it with --print.", EXAMPLES)
    p.add_argument("--scheduler", default="slurm", choices=("slurm", "pbs"), help="batch system (default slurm)")
    p.add_argument("--nodes", type=int, default=1, help="nodes to allocate (default 1)")
    p.add_argument("--ntasks-per-node", type=int, default=1, help="tasks (ranks) per node to allocate (default 1)")
    p.add_argument("--gpus-per-node", type=int, default=None, help="GPUs per node to allocate")
    p.add_argument("--time", default="01:00:00", help="wall time, [D-]HH:MM:SS read as Slurm reads it (90: 90 minutes); PBS gets it as HH:MM:SS (default 01:00:00)")
    p.add_argument("--job-name", default="envmatrix", help="job name (default envmatrix)")
    p.add_argument("--account", default=None, help="account / project to charge")
    p.add_argument("--queue", default=None, help="Slurm partition (or a comma list: gpu,debug) or PBS queue")
    p.add_argument("--output", default=None, help="job output file (default envmatrix-%%j.out / envmatrix.out)")
    p.add_argument("--directive", action="append", default=[], metavar="OPT", help="extra directive option (repeatable)")
    p.add_argument("--script", default=None, metavar="PATH",
                   help="where to write the script (default: envmatrix-XXXXXXXX.sh in the current directory); it is kept")
    p.add_argument("--print", dest="print_only", action="store_true", help="print the script; submit nothing")
    p.add_argument("command", nargs=argparse.REMAINDER, help="sweep|bisect|search and its arguments (after --)")
    p.set_defaults(func=cmd_submit)


def cmd_submit(args: argparse.Namespace) -> int:
    from envmatrix.app.submit import SubmitRequest, submit

    check_command_flags(args.command[1:] if args.command[:1] == ["--"] else list(args.command))
    if args.print_only and args.script is not None:  # --print wrote nothing, so --script was dropped without a word
        from envmatrix.errors import ConfigError

        raise ConfigError(f"envmatrix submit --script {args.script}: not with --print, which prints the script and writes "
                          "nothing; allowed: --print (look first) or --script PATH (write it there and submit it)")
    done = submit(request_from(SubmitRequest, args))
    if done.script_path is None:
        sys.stdout.write(done.script_text)
    else:
        print(f"submitted job {done.job_id or '?'}; script {done.script_path}")
    return 0


def check_command_flags(command: list[str]) -> None:
    """The batch job's own flags are parsed here as the job would parse them: a mistyped flag is said now, not
    after the job waited in the queue, and so are its overrides' syntax and key names. Config content (conf=, the
    values) is read inside the job, where it lives."""
    from envmatrix.cli import COMMANDS, build_parser
    from envmatrix.errors import ConfigError

    if not command or command[0] not in COMMANDS or {"-h", "--help"} & set(command):
        return  # the verb is checked with the other batch options (launchers.submit.check)
    parsed, extra = build_parser().parse_known_args(command)
    stray = [w for w in extra if w.startswith("-") or "=" not in w]
    if stray:
        raise ConfigError(f"envmatrix submit: {command[0]} does not take {' '.join(stray)}; allowed: the flags of "
                          f"envmatrix {command[0]} --help and key=value overrides")
    if command[0] in ("sweep", "bench", "bisect", "search"):  # what the job's config cannot change: syntax, key names
        from envmatrix.config.compose import check_overrides

        check_overrides([*getattr(parsed, "overrides", []), *extra])
