"""Site transport policy: fail a probe whose NCCL traffic took a forbidden transport.

Admins check that intra-node traffic stays on NVLink (P2P) and never silently
falls back to SHM or NET/Socket; with ``probe.forbid_transport: [NET]`` such a
fallback is a failure (class ``wrong_transport``) with the transport counts as
its root cause. The transports come from the ranks' NCCL INFO logs, so setting
the policy turns NCCL_DEBUG=INFO on for the probe.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from envmatrix.errors import ConfigError, did_you_mean
from envmatrix.results import WRONG_TRANSPORT  # noqa: F401  (re-exported for callers)

#: what NCCL's "via ..." lines name first (parsers.nccl_log): a policy entry is one of them, or one with its kind
TRANSPORT_FAMILIES = ("P2P", "SHM", "NET", "COLLNET")


def forbidden_transports(raw: Any, key: str) -> list[str]:
    """``probe.forbid_transport`` as given (one transport or a list): a typo such as NTE would never match, so the
    policy would pass every cell, and a number or 'NET' read letter by letter were what a list comprehension saw."""
    items = [] if raw is None else [raw] if isinstance(raw, str) else raw
    if not isinstance(items, (list, tuple)):
        raise ConfigError(f"{key}: {raw!r} is not a list; allowed: transports such as [NET] or [SHM, NET/Socket]")
    for i, item in enumerate(items):
        family = item.split("/", 1)[0] if isinstance(item, str) else ""
        if family not in TRANSPORT_FAMILIES:
            raise ConfigError(f"{key}[{i}]: {item!r} is not a transport{did_you_mean(family, TRANSPORT_FAMILIES)}; "
                              f"allowed: {', '.join(TRANSPORT_FAMILIES)}, alone or with a kind (NET/Socket, P2P/CUMEM)")
    return list(items)


def transport_violation(facts: Mapping[str, Any], forbidden: Sequence[str]) -> Optional[str]:
    """The root-cause line when a forbidden transport carried traffic, else None."""
    if not forbidden:
        return None
    used = facts.get("transports") or {}
    bad = {t: n for t, n in used.items() if any(t == f or t.startswith(f.rstrip("/") + "/") for f in forbidden)}
    if not facts:
        return "no NCCL log to check the transport policy (run with NCCL_DEBUG=INFO)"
    if not bad:
        return None
    seen = ", ".join(f"{t} x{n}" for t, n in sorted(bad.items(), key=lambda kv: -kv[1]))
    return f"forbidden transport used: {seen} (forbid_transport: {', '.join(forbidden)})"
