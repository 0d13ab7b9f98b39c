"""``envmatrix network show|reset``: what envmatrix has shaped, and removing it by hand."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from envmatrix.errors import PlanError


@dataclass(frozen=True)
class NetworkResetRequest:
    force: bool = False  # also what live runs installed (they lose their condition mid-run)
    unrecorded: bool = False  # also envmatrix's handles no state file accounts for (a lost /run, another state dir)


@dataclass(frozen=True)
class NetworkResetOutcome:
    removed: list[str]
    kept_live: list[str]  # links live runs still shape (left alone without --force)


@dataclass(frozen=True)
class ShapedLink:
    link: str
    condition: str
    owner_pid: Optional[int]
    owner_alive: bool
    tree: str  # the link's qdiscs now, with statistics


@dataclass(frozen=True)
class NetworkView:
    links: list[ShapedLink]
    unrecorded: list[str]  # envmatrix's handles found on links no state entry accounts for
    kernel: dict = field(default_factory=dict)  # feature -> None (works) or the kernel's refusal


def remove_leftovers(report: Callable[[str], None]) -> list[str]:
    """Every command's first step: undo what killed runs left shaped, saying so through ``report`` in one line."""
    from envmatrix.network.state import reap_stale

    return reap_stale(report)


def reset(request: NetworkResetRequest) -> NetworkResetOutcome:
    from envmatrix.network import shaping, state, unrecorded

    _require_privileges("network reset")
    live = [(e, path) for path, _, e in state.entries(include_live=True)
            if not request.force and _owner_alive(path)]
    removed = state.reap_stale(include_live=request.force)
    skip = [shaping.Link(e["netns"], e["ifname"]) for e, _ in live] + \
           [shaping.Link(e["netns"], e["ifb"]) for e, _ in live if e.get("ifb")]
    if request.unrecorded:  # they may be a live run's whose state lives elsewhere (ENVMATRIX_STATE_DIR): asked for only
        removed += unrecorded.remove_unrecorded(skip)
    return NetworkResetOutcome(removed, [str(shaping.Link(e["netns"], e["ifname"])) for e, _ in live])


def show() -> NetworkView:
    from envmatrix.network import netlink, shaping, state, unrecorded

    _require_privileges("network show")
    recorded = []
    for path, _, entry in state.entries(include_live=True):
        link = shaping.Link(entry["netns"], entry["ifname"])
        pid, alive = state.owner(path)
        try:
            tree = shaping.dump(link, entry)
        except netlink.NetlinkFailed as exc:
            tree = f"({exc})"
        recorded.append(ShapedLink(str(link), entry.get("condition", ""), pid, alive, tree))
    known = {r.link for r in recorded}
    unrecorded = [f"{kind} on {link}" for link, kind in unrecorded.installed_anywhere()
                  if str(link) not in known and kind != "ifb"]
    return NetworkView(recorded, unrecorded, dict(shaping.kernel_support()))


def _owner_alive(path) -> bool:
    from envmatrix.network import state

    return state.owner(path)[1]


def _require_privileges(what: str) -> None:
    from envmatrix.network import shaping

    problem = shaping.privilege_problem()
    if problem:
        raise PlanError(f"{what}: {problem}; run it as root")
