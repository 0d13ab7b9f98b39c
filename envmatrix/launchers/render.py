"""A launch plan as shell text a person can copy into a terminal or a ticket (``--dry-run``); pure.

Every word goes through shlex.quote, so values with spaces, quotes, ``$``, ``;`` or newlines
arrive literally, exactly as the driver passes them (it never uses a shell). The env is written
relative to the shell it is pasted into (``base_env``, the driver's own env): ``env -u NAME``
for what the driver removes (hermetic runs), ``NAME=VALUE`` for what it adds or changes.
mpirun/mpiexec/srun/torchrun get the inherited env only, so their lines carry the variables in
the launcher's own flags (``-x``, ``--env``/``-genv``, ``--export``) and need no prefix.
"""

from __future__ import annotations

import os
import shlex
from typing import Any, Mapping

from envmatrix.boundary import ProcessSpec
from envmatrix.launchers.base import LaunchPlan


def env_changes(env: Mapping[str, str], base_env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """(variables added or changed, names removed) going from ``base_env`` to ``env``."""
    added = {k: v for k, v in sorted(env.items()) if base_env.get(k) != v}
    return added, sorted(k for k in base_env if k not in env)


def process_line(spec: ProcessSpec, base_env: Mapping[str, str]) -> str:
    added, removed = env_changes(spec.env, base_env)
    words: list[str] = []
    if added or removed:
        words.append("env")
        for name in removed:
            words += ["-u", name]
        words += [f"{k}={v}" for k, v in added.items()]
    words += spec.argv
    line = shlex.join(words)
    return f"cd {shlex.quote(spec.cwd)} && {line}" if spec.cwd else line


def plan_script(plan: LaunchPlan, base_env: Mapping[str, str], workdir: str) -> str:
    """The run as shell lines: create its result dir, start every process (background when several), wait."""
    lines = [f"mkdir -p {shlex.quote(workdir)}"]
    many = len(plan.processes) > 1
    for spec in plan.processes:
        lines.append(process_line(spec, base_env) + (" &" if many else ""))
    if many:
        lines.append("wait")
    return "\n".join(lines)


def plan_json(plan: LaunchPlan, base_env: Mapping[str, str], workdir: str) -> dict[str, Any]:
    """The same plan for tools: argv lists and env changes, no shell parsing needed."""
    processes = []
    for spec in plan.processes:
        added, removed = env_changes(spec.env, base_env)
        processes.append({"label": spec.label, "argv": list(spec.argv), "cwd": spec.cwd, "env_set": added,
                          "env_unset": removed, "log": os.path.basename(spec.log_path),
                          "shell": process_line(spec, base_env)})
    return {"workdir": workdir, "processes": processes, "shell": plan_script(plan, base_env, workdir)}
