"""``nvidia-smi topo -m`` -> the link type of every GPU pair (NV#, PIX, PXB, PHB, NODE, SYS), pure.

The matrix's header names its columns (GPU0.., NIC0.., CPU Affinity...); each ``GPUi`` row gives, per GPU column,
how GPU i reaches GPU j (``X`` itself). nvidia-smi separates cells with tabs and underlines the header with escape
codes; both are ignored, so text copied with spaces parses too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_GPU = re.compile(r"^GPU(\d+)$")
# link types, fastest first (NCCL_P2P_LEVEL's order for the PCIe ones): what "better link" means in a table
LINK_ORDER = ("NV", "PIX", "PXB", "PHB", "NODE", "SYS")


@dataclass
class TopoMatrix:
    gpus: list[int] = field(default_factory=list)
    links: dict[tuple[int, int], str] = field(default_factory=dict)  # (i, j) -> "NV12", "PIX", "SYS", ...
    cpu_affinity: dict[int, str] = field(default_factory=dict)

    def link(self, a: int, b: int) -> Optional[str]:
        return self.links.get((a, b))


def parse_topo_matrix(text: str) -> TopoMatrix:
    """The GPU-to-GPU part of ``nvidia-smi topo -m``; an empty matrix when the text holds none."""
    out = TopoMatrix()
    columns: list[int] = []
    for raw in _ANSI.sub("", text or "").splitlines():
        tokens = raw.split()
        if not tokens:
            if columns and out.links:
                break  # the legend follows the matrix
            continue
        if not columns and _GPU.match(tokens[0]) and len(tokens) > 1 and _GPU.match(tokens[1]):
            columns = [int(_GPU.match(t).group(1)) for t in tokens if _GPU.match(t)]
            continue
        row = _GPU.match(tokens[0])
        if not columns or row is None or len(tokens) < 1 + len(columns):
            continue
        i = int(row.group(1))
        out.gpus.append(i)
        for j, cell in zip(columns, tokens[1 : 1 + len(columns)]):
            if j != i and cell != "X":
                out.links[(i, j)] = cell
        tabs = raw.split("\t")
        if len(tabs) > 1 + len(columns):
            affinity = [c.strip() for c in tabs[1 + len(columns):] if re.match(r"^\d+(?:[-,]\d+)*$", c.strip())]
            if affinity:
                out.cpu_affinity[i] = affinity[0]
    return out


def link_rank(label: Optional[str]) -> int:
    """Sort key: NV# first (more links first), then PIX .. SYS; unknown last."""
    if not label:
        return 99
    if label.startswith("NV") and label[2:].isdigit():
        return -int(label[2:])
    return LINK_ORDER.index(label) if label in LINK_ORDER else 98
