"""Site transport policy: fail a probe whose NCCL traffic took a forbidden transport.

Admins check that intra-node traffic stays on NVLink (P2P) and never silently
falls back to SHM or NET/Socket; with ``probe.forbid_transport: [NET]`` such a
fallback is a failure (class ``wrong_transport``) with the transport counts as
its root cause. The transports come from the ranks' NCCL INFO logs, so setting
the policy turns NCCL_DEBUG=INFO on for the probe.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence


from envmatrix.results import WRONG_TRANSPORT  # noqa: F401  (re-exported for callers)


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
