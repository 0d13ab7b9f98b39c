"""Host lists as people and MPI write them: ``HOST``, ``HOST N``, ``HOST:N`` or ``HOST slots=N`` lines (an OpenMPI
hostfile works). Read by ``bisect --hosts`` and by the cluster launchers' ``launcher_opts.<name>.hostfile``."""

from __future__ import annotations

from typing import Optional


def parse_host_list(text: str, where: str) -> list[tuple[str, Optional[int]]]:
    """``host``, ``host N``, ``host:N`` or ``host slots=N`` lines (an MPI hostfile works); # comments."""
    from envmatrix import values
    from envmatrix.errors import ConfigError

    out: list[tuple[str, Optional[int]]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        host, slots = words[0], None
        if ":" in host:
            host, _, slots_text = host.partition(":")
            words = [host, slots_text, *words[1:]]
        rest = words[1:]
        if rest:
            value = rest[0].split("=", 1)[1] if rest[0].startswith(("slots=", "max_slots=")) else rest[0]
            if not value.isdigit() or int(value) < 1 or len(rest) > 1 and not rest[1].startswith("max_slots="):
                raise ConfigError(f"{where}:{number}: {raw.strip()!r} not understood; allowed: HOST, HOST N, HOST:N or HOST slots=N")
            slots = int(value)
        values.host(f"{where}:{number}", host)
        if any(h == host for h, _ in out):
            raise ConfigError(f"{where}:{number}: host {host!r} listed twice; list each host once")
        out.append((host, slots))
    if len(out) < 1:
        raise ConfigError(f"{where}: no hosts in it; give one host a line (HOST, HOST N or HOST slots=N)")
    return out
