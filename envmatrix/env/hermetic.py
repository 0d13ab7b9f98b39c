"""Hermetic runs: keep NCCL's config files from silently filling unset variables.

NCCL reads ``NCCL_CONF_FILE`` (else ``~/.nccl.conf``) and then
``/etc/nccl.conf``, setting each variable found there only when the
environment does not set it (src/misc/param.cc, ``setenv(..., 0)``). A
hermetic run points NCCL_CONF_FILE at /dev/null and gives every variable that
/etc/nccl.conf would fill its catalogued default explicitly; variables without
a known default are reported as not neutralisable.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

SYSTEM_CONF = "/etc/nccl.conf"


def hermetic_environment(
    environ: Mapping[str, str], conf_files: Sequence[Mapping[str, Any]], catalog: Any
) -> tuple[dict[str, str], dict[str, Any]]:
    """(env for the ranks, what was done) — pure."""
    env = dict(environ)
    env["NCCL_CONF_FILE"] = "/dev/null"
    pinned, left = {}, []
    for conf in conf_files:
        if conf.get("path") != SYSTEM_CONF:
            continue  # NCCL_CONF_FILE=/dev/null already hides the per-user file
        for var in conf.get("variables", {}):
            if var in environ:
                continue  # an explicit variable already wins over the file
            spec = catalog.spec(var) if var in catalog else None
            if spec is not None and spec.default is not None:
                env[var] = str(spec.default)
                pinned[var] = str(spec.default)
            else:
                left.append(var)
    return env, {"NCCL_CONF_FILE": "/dev/null", "pinned_to_defaults": pinned, "not_neutralisable": left}
