#!/usr/bin/env python3
"""Issue 37's landscapes: 8 knobs, ~52k configs, failing regions, a broad optimum at 0.90 and a narrow basin.

Every search runs through envmatrix's own space, samplers and ask/tell loop (``run_search``) against an
in-process objective: a noise-free landscape (``true``) measured with +-3% uniform multiplicative noise; a
failing row returns a failed trial (failure_class ``nccl_refused``), as a refused NCCL init does. After
``--trials`` trials the export is what `envmatrix search` exports: the top 3 trials and the default env
re-measured in 3 interleaved rounds (envmatrix.search.confirm, not counted in the budget), the confirmed
winner, or the default when nothing beats it. Score = true(exported) / max(true).

Families (each seed draws a new landscape of that family):
  scale8   8 knobs (ALGO, PROTO, MIN_NCHANNELS, BUFFSIZE, NTHREADS, SOCKET_NTHREADS, NSOCKS_PERTHREAD,
           P2P_NET_CHUNKSIZE; 51,840 configs). Broad component: pairwise-coupled bumps (the best protocol's
           base depends on the algorithm, knob peaks on a choice, the sockets on their product), scaled so its
           best is 0.90 of the optimum. Narrow basin: three random knobs at values where the broad component
           is poor (never unset); each knob off its basin value multiplies the basin by 0.7 (one step) or 0.45 (further), so
           from the broad optimum changing one or two of the three knobs is downhill and only all three reach
           1.0. Failing (~16%): SOCKET_NTHREADS x NSOCKS_PERTHREAD > 64 (NCCL's socket limit),
           NCCL_PROTO=LL128 with NCCL_NTHREADS=128, BUFFSIZE=16M with 32 channels.
  heldout8 written before the scale strategy was tuned, run once at the end: 9 variables (adds
           NCCL_CROSS_NIC), ~62k configs; broad optimum 0.90 from a channels x threads ridge whose position
           depends on the protocol; the narrow basin mixes a choice variable and two knobs (0.75 / 0.5 per
           knob off); failing: sockets > 64, ALGO=Tree with PROTO=LL, NTHREADS=512 with >= 16 channels.

  heldout_b written after the scale plan's last change, run once (seeds 1000-1019): 8 variables with a four-valued
           PROTO, 86,400 configs; broad optimum from channels peaked per protocol, threads per algorithm and a
           buffers x channels ridge; basin trio from PROTO and five knobs (0.72 / 0.5 per knob off); failing (~25%):
           sockets > 64, Tree with LL, LL128 with 64 threads, 16M buffers with 32 channels.

  heldout_c written before any change of issue 37's second quality pass was run on it (2026-11-26): 8 variables,
           other knobs (PROTO x4, MAX_NCHANNELS, NTHREADS x5, BUFFSIZE 2-32M, IB_QPS_PER_CONNECTION, NET_GDR_LEVEL,
           P2P_NVL_CHUNKSIZE, IB_SPLIT_DATA_ON_QPS), 64,000 configs; broad component one Gaussian above one floor (0.3)
           (a channels + threads Gaussian ridge per protocol, buffers peaked per GDR level, QPs per split), basin trio
           from channels, buffers, QPs, GDR level and NVL chunk (0.78 / 0.5 / 0.35 at 1 / 2 / 3+ steps off);
           failing (~20%): 8 QPs with split data, LL with 32M buffers, and a three-variable rule (>= 256 threads,
           >= 16 channels, GDR level PHB or SYS) that no pair rule covers exactly.

  heldout_d written 2026-11-26 10:20 UTC, before its first run, after the scale plan's exploration stopped drawing a
           knob's unset value (a change measured on the other families, whose basins never hold an unset value): 8
           variables (ALGO, PROTO x4, MIN_NCHANNELS 2-32, NTHREADS 64-512, BUFFSIZE 1-16M, SOCKET_NTHREADS,
           NSOCKS_PERTHREAD, NET_GDR_LEVEL), 172,800 configs; broad component exp of a sum of pairwise terms (a base
           per algorithm x protocol, channels peaked per protocol, threads per algorithm, buffers per GDR level, the
           sockets' product); the basin trio from PROTO, channels, threads, buffers, GDR level and socket threads,
           and here a basin value MAY be unset where unset is a setting of its own (NCCL's automatic protocol or
           channel count, no GDR level given; never all three), 0.74 / 0.48 / 0.4 per 1 / 2 / 3+ steps off;
           failing (~18%): sockets > 64, Tree with LL, LL128 with 64 threads, and GDR level SYS with 16M buffers
           and >= 16 channels (a three-variable rule).

  heldout_e written 2026-11-26 12:05 UTC, before its first run, when heldout_d became a family tuned on: 8 variables
           (ALGO, PROTO x4, MAX_NCHANNELS 2-32, NTHREADS 64-512, BUFFSIZE 1-16M without 4M, IB_QPS_PER_CONNECTION,
           SOCKET_NTHREADS, NSOCKS_PERTHREAD), 180,000 configs; broad component additive (a base per algorithm x
           protocol times a floor plus the mean of four bumps: channels + buffers ridge per algorithm, threads per
           protocol, QPs per algorithm, the sockets' product); the basin trio from PROTO, channels, threads, buffers,
           QPs and socket threads, a basin value may be unset for PROTO and channels (automatic), 0.76 / 0.5 / 0.38
           per 1 / 2 / 3+ steps off; failing (~15%): sockets > 64, Tree with LL128, LL with 512 threads, 16M buffers
           with 4 QPs and >= 16 channels (a three-variable rule).

  heldout_f written 2026-11-27 07:55 UTC, before any plan change of that session was run, when heldout_e had been tuned
           on: 9 variables (ALGO, PROTO x4, MIN_NCHANNELS 4-32, NTHREADS 128-512, BUFFSIZE 1-16M, NET_GDR_LEVEL,
           SOCKET_NTHREADS 2-8, NSOCKS_PERTHREAD 2-16, CROSS_NIC), 153,600 configs; broad component BIMODAL (the better
           of two products of coupled bumps, the second basin 0.85 of the first, with other peaks and a protocol of its
           own), so a climb can settle on the wrong broad basin too; the basin trio from PROTO (a choice), channels,
           threads, buffers, GDR level and sockets per thread, GDR level may be unset, 0.8 / 0.55 / 0.4 per 1 / 2 /
           3+ steps off; failing (~20%): sockets > 64, Ring with LL and 512 threads (three variables), CROSS_NIC with
           GDR level LOC, 16M buffers with 32 channels.

  heldout_g written 2026-11-27 11:00 UTC, before any plan change of that session was run, when heldout_f had been run:
           8 variables (ALGO, PROTO x4, MAX_NCHANNELS 4-32, NTHREADS 64-512, BUFFSIZE 1-32M, IB_QPS_PER_CONNECTION 1-8,
           P2P_NET_CHUNKSIZE, NET_GDR_LEVEL), 90,000 configs; broad component exp of pairwise terms (a base per
           algorithm x protocol, a DIAGONAL channels-minus-buffers ridge per protocol, threads per protocol, QPs per
           GDR level, the chunk size per algorithm); the basin trio from PROTO, channels, threads, buffers, QPs, GDR
           level and chunk size, channels and QPs may be unset (automatic), 0.72 / 0.5 / 0.36 per 1 / 2 / 3+ steps off;
           failing: LL128 with 64 threads, 8 QPs with 32 channels, LL with 32M buffers, Tree with GDR level SYS and 512
           threads (three variables).

  heldout_h written 2026-11-27 20:35 UTC, before its first run, when every earlier family had been run: 9 variables
           (ALGO, PROTO x4, MIN_NCHANNELS 2-32, NTHREADS 64-512, BUFFSIZE 1-16M, IB_QPS_PER_CONNECTION 1-4,
           SOCKET_NTHREADS, NSOCKS_PERTHREAD 1-8, P2P_NET_CHUNKSIZE), 432,000 configs; broad component exp of terms with
           a THREE-variable coupling none of the earlier families has (the channels x threads product peaked per
           algorithm and protocol: more channels want fewer threads), buffers peaked per QP count, the chunk size per
           protocol, the sockets' product, a floor; the basin trio from ALGO and PROTO (choices) and five knobs,
           PROTO and threads may be unset (automatic), a sharper fall-off (0.68 / 0.45 / 0.33 per 1 / 2 / 3+ steps
           off); failing: sockets > 64, Tree with LL128, LL with 512 threads and 32 channels (three variables), 4 QPs
           with 16M buffers.

  python benchmarks/search_scale.py --first-seed 100 --seeds 20 --samplers descent,structured,tpe,tpe-group,random
  python benchmarks/search_scale.py --fidelity --seeds 20   # cheap vs full fidelity: recorded H200 1x4 and these
  python benchmarks/search_scale.py --attraction --families scale8 --first-seed 2000 --seeds 40  # why half the seeds
  python benchmarks/search_scale.py --modes --families scale8 --first-seed 2000 --seeds 40  # how each miss missed
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from search_landscapes import bump, default_row  # noqa: E402

from envmatrix.search.confirm import DEFAULT, confirm  # noqa: E402
from envmatrix.search.objective import EvalOutcome, parse_objectives  # noqa: E402
from envmatrix.search.space import SearchSpace, parse_search_space  # noqa: E402
from envmatrix.search.study import SearchSettings, make_sampler, run_search  # noqa: E402

NOISE = 0.03
K, M = 1024, 1048576
SOCK = [None, 1, 2, 4, 8, 16]
SPACES = {
    "scale8": {"NCCL_ALGO": [None, "Ring", "Tree"], "NCCL_PROTO": [None, "LL128", "Simple"],
               "NCCL_MIN_NCHANNELS": [None, 2, 8, 16, 32], "NCCL_BUFFSIZE": [None, M, 4 * M, 16 * M],
               "NCCL_NTHREADS": [None, 128, 256, 512], "NCCL_SOCKET_NTHREADS": SOCK, "NCCL_NSOCKS_PERTHREAD": SOCK,
               "NCCL_P2P_NET_CHUNKSIZE": [None, 512 * K]},
    "heldout8": {"NCCL_ALGO": [None, "Ring", "Tree"], "NCCL_PROTO": [None, "LL", "Simple"], "NCCL_CROSS_NIC": [None, 1],
                 "NCCL_MIN_NCHANNELS": [None, 4, 8, 16, 32], "NCCL_BUFFSIZE": [None, 2 * M, 8 * M],
                 "NCCL_NTHREADS": [None, 128, 256, 512], "NCCL_SOCKET_NTHREADS": SOCK, "NCCL_NSOCKS_PERTHREAD": SOCK,
                 "NCCL_P2P_NET_CHUNKSIZE": [None, 128 * K]},
    "heldout_b": {"NCCL_ALGO": [None, "Ring", "Tree"], "NCCL_PROTO": [None, "LL", "LL128", "Simple"],
                  "NCCL_MIN_NCHANNELS": [None, 4, 8, 16, 32], "NCCL_BUFFSIZE": [None, M, 4 * M, 16 * M],
                  "NCCL_NTHREADS": [None, 64, 128, 256, 512], "NCCL_SOCKET_NTHREADS": SOCK,
                  "NCCL_NSOCKS_PERTHREAD": SOCK, "NCCL_P2P_NET_CHUNKSIZE": [None, 512 * K]},
    "heldout_c": {"NCCL_PROTO": [None, "LL", "LL128", "Simple"], "NCCL_MAX_NCHANNELS": [None, 4, 8, 16, 32],
                  "NCCL_NTHREADS": [None, 64, 128, 256, 512], "NCCL_BUFFSIZE": [None, 2 * M, 8 * M, 32 * M],
                  "NCCL_IB_QPS_PER_CONNECTION": [None, 1, 2, 4, 8], "NCCL_NET_GDR_LEVEL": [None, "LOC", "PHB", "SYS"],
                  "NCCL_P2P_NVL_CHUNKSIZE": [None, 128 * K, 512 * K, 2 * M], "NCCL_IB_SPLIT_DATA_ON_QPS": [None, 1]},
    "heldout_d": {"NCCL_ALGO": [None, "Ring", "Tree"], "NCCL_PROTO": [None, "LL", "LL128", "Simple"],
                  "NCCL_MIN_NCHANNELS": [None, 2, 4, 8, 16, 32], "NCCL_NTHREADS": [None, 64, 128, 256, 512],
                  "NCCL_BUFFSIZE": [None, M, 4 * M, 16 * M], "NCCL_SOCKET_NTHREADS": [None, 1, 2, 4, 8],
                  "NCCL_NSOCKS_PERTHREAD": [None, 1, 2, 4, 8, 16], "NCCL_NET_GDR_LEVEL": [None, "LOC", "PHB", "SYS"]},
    "heldout_e": {"NCCL_ALGO": [None, "Ring", "Tree"], "NCCL_PROTO": [None, "LL", "LL128", "Simple"],
                  "NCCL_MAX_NCHANNELS": [None, 2, 4, 8, 16, 32], "NCCL_NTHREADS": [None, 64, 128, 256, 512],
                  "NCCL_BUFFSIZE": [None, M, 2 * M, 8 * M, 16 * M], "NCCL_IB_QPS_PER_CONNECTION": [None, 1, 2, 4],
                  "NCCL_SOCKET_NTHREADS": [None, 1, 2, 4, 8], "NCCL_NSOCKS_PERTHREAD": [None, 1, 2, 4, 8]},
    "heldout_f": {"NCCL_ALGO": [None, "Ring", "Tree"], "NCCL_PROTO": [None, "LL", "LL128", "Simple"],
                  "NCCL_MIN_NCHANNELS": [None, 4, 8, 16, 32], "NCCL_NTHREADS": [None, 128, 256, 512],
                  "NCCL_BUFFSIZE": [None, M, 4 * M, 16 * M], "NCCL_NET_GDR_LEVEL": [None, "LOC", "PHB", "SYS"],
                  "NCCL_SOCKET_NTHREADS": [None, 2, 4, 8], "NCCL_NSOCKS_PERTHREAD": [None, 2, 4, 8, 16],
                  "NCCL_CROSS_NIC": [None, 1]},
    "heldout_g": {"NCCL_ALGO": [None, "Ring", "Tree"], "NCCL_PROTO": [None, "LL", "LL128", "Simple"],
                  "NCCL_MAX_NCHANNELS": [None, 4, 8, 16, 32], "NCCL_NTHREADS": [None, 64, 128, 256, 512],
                  "NCCL_BUFFSIZE": [None, M, 2 * M, 8 * M, 32 * M], "NCCL_IB_QPS_PER_CONNECTION": [None, 1, 2, 4, 8],
                  "NCCL_P2P_NET_CHUNKSIZE": [None, 128 * K, 512 * K], "NCCL_NET_GDR_LEVEL": [None, "LOC", "PHB", "SYS"]},
    "heldout_h": {"NCCL_ALGO": [None, "Ring", "Tree"], "NCCL_PROTO": [None, "LL", "LL128", "Simple"],
                  "NCCL_MIN_NCHANNELS": [None, 2, 4, 8, 16, 32], "NCCL_NTHREADS": [None, 64, 128, 256, 512],
                  "NCCL_BUFFSIZE": [None, M, 4 * M, 16 * M], "NCCL_IB_QPS_PER_CONNECTION": [None, 1, 2, 4],
                  "NCCL_SOCKET_NTHREADS": [None, 1, 2, 4, 8], "NCCL_NSOCKS_PERTHREAD": [None, 1, 2, 4, 8],
                  "NCCL_P2P_NET_CHUNKSIZE": [None, 128 * K, 512 * K]},
}
# NCCL's own value for an unset variable, where it is one of the listed values (its position on the axis)
NCCL_DEFAULTS = {"NCCL_SOCKET_NTHREADS": "1", "NCCL_NSOCKS_PERTHREAD": "1", "NCCL_NTHREADS": "512",
                 "NCCL_BUFFSIZE": str(4 * M), "NCCL_P2P_NET_CHUNKSIZE": str(128 * K), "NCCL_IB_QPS_PER_CONNECTION": "1",
                 "NCCL_P2P_NVL_CHUNKSIZE": str(512 * K)}


def make_space(name: str) -> SearchSpace:
    from envmatrix.catalog import load_catalog

    return parse_search_space({"space": SPACES[name]}, load_catalog(), {}, f"landscape {name}: search")


def axis(space: SearchSpace, var: str) -> Callable[[int], float]:
    """Value index -> position in [0, 1] along the sorted numeric values; unset -> NCCL's default or mid-range."""
    vals = space.choices(var)
    if not all(v is None or v.replace(".", "").isdigit() for v in vals) or len(vals) < 3:
        return lambda i: float(i)
    nums = sorted({float(v) for v in vals if v is not None})
    if len(nums) < 2:
        return lambda i: float(i)
    rank = {n: r / (len(nums) - 1) for r, n in enumerate(nums)}
    dflt = NCCL_DEFAULTS.get(var)
    unset = rank.get(float(dflt), 0.5) if dflt is not None and float(dflt) in rank else 0.5
    return lambda i: unset if vals[i] is None else rank[float(vals[i])]


def sockets(space: SearchSpace, row: tuple) -> int:
    get = {v: space.choices(v)[row[k]] for k, v in enumerate(space.vars)}
    return int(get["NCCL_SOCKET_NTHREADS"] or 1) * int(get["NCCL_NSOCKS_PERTHREAD"] or 1)


def _narrow(space: SearchSpace, rng: random.Random, broad: dict, pool: list[int], near: float, far: float,
            farther: Optional[float] = None, unset_ok: tuple[int, ...] = ()) -> tuple[dict, dict[int, int]]:
    """A basin at three variables of ``pool``, each at a value where the broad optimum is not, x(near|far) per knob
    off (x farther three or more steps off, where given); a basin value is unset only for ``unset_ok`` variables,
    and never all three (the default env must not sit in the basin already). Also returns the basin's {variable: value}."""
    top = max(broad, key=broad.get)

    def set_values(k: int) -> list[int]:
        return [v for v, x in enumerate(space.choices(space.vars[k])) if x is not None or k in unset_ok]

    while True:
        trio = rng.sample([k for k in pool if any(v != top[k] for v in set_values(k))], 3)
        target = {k: rng.choice([v for v in set_values(k) if abs(v - top[k]) >= 2] or [v for v in set_values(k) if v != top[k]])
                  for k in trio}
        if any(space.choices(space.vars[k])[v] is not None for k, v in target.items()):
            break
    others_best: dict[tuple, float] = {}
    for r, v in broad.items():  # the best broad value per setting of the non-trio variables (its shape outside the trio)
        key = tuple(x for k, x in enumerate(r) if k not in trio)
        others_best[key] = max(v, others_best.get(key, 0.0))
    peak = max(others_best.values())
    out = {}
    for r in broad:
        f = 1.0
        for k in trio:
            d = abs(r[k] - target[k])
            f *= 1.0 if d == 0 else near if d == 1 else far if d == 2 or farther is None else farther
        out[r] = f * others_best[tuple(x for k, x in enumerate(r) if k not in trio)] / peak
    return out, target


LAST_BASIN: dict[tuple[str, int], dict[int, int]] = {}  # (family, seed) -> the basin's three {variable: value}


def family_table(family: str, seed: int) -> tuple[SearchSpace, dict[tuple, Optional[float]]]:
    """row -> true busbw (optimum 1.0), None where NCCL refuses the config."""
    rng = random.Random(f"{family}-{seed}")
    space = make_space(family)
    names = list(space.vars)
    pos = [axis(space, v) for v in names]
    val = lambda r, v: space.choices(v)[r[names.index(v)]]  # noqa: E731
    rows = space.allowed_rows()
    broad: dict[tuple, float] = {}
    if family == "scale8":
        a, p = names.index("NCCL_ALGO"), names.index("NCCL_PROTO")
        knobs = [k for k in range(len(names)) if k not in (a, p)]
        base = {(x, y): rng.uniform(0.55, 1.0) for x in range(3) for y in range(3)}
        peaks = {(k, c): rng.random() for k in knobs for c in range(3)}
        widths = {k: rng.uniform(0.3, 0.6) for k in knobs}
        floors = {k: rng.uniform(0.45, 0.75) for k in knobs}
        s_peak = rng.uniform(0.4, 0.8)
        for r in rows:
            v = base[(r[a], r[p])]
            for j, k in enumerate(knobs):
                if names[k] in ("NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD"):
                    continue
                v *= bump(pos[k](r[k]), peaks[(k, r[(a, p)[j % 2]])], widths[k], floors[k])
            v *= bump(math.log2(sockets(space, r)) / 6, s_peak, 0.35, 0.5)  # sockets: their product counts
            broad[r] = v
        narrow, basin = _narrow(space, rng, broad, knobs, 0.7, 0.45)

        def fails(r: tuple) -> bool:
            return (sockets(space, r) > 64 or (val(r, "NCCL_PROTO") == "LL128" and val(r, "NCCL_NTHREADS") == "128")
                    or (val(r, "NCCL_BUFFSIZE") == str(16 * M) and val(r, "NCCL_MIN_NCHANNELS") == "32"))
    elif family == "heldout8":
        a, p, x = names.index("NCCL_ALGO"), names.index("NCCL_PROTO"), names.index("NCCL_CROSS_NIC")
        c, t, b = names.index("NCCL_MIN_NCHANNELS"), names.index("NCCL_NTHREADS"), names.index("NCCL_BUFFSIZE")
        ch = names.index("NCCL_P2P_NET_CHUNKSIZE")
        base = {(i, j, n): rng.uniform(0.5, 1.0) for i in range(3) for j in range(3) for n in range(2)}
        ridge = {j: rng.uniform(0.5, 1.5) for j in range(3)}
        bpeak = {i: rng.random() for i in range(3)}
        s_peak, cpen = rng.uniform(0.3, 0.9), rng.uniform(0.8, 1.0)
        for r in rows:
            v = base[(r[a], r[p], r[x])] * bump(pos[c](r[c]) + pos[t](r[t]), ridge[r[p]], 0.4, 0.4)
            v *= bump(pos[b](r[b]), bpeak[r[a]], 0.5, 0.6) * (cpen if r[ch] else 1.0)
            v *= bump(math.log2(sockets(space, r)) / 6, s_peak, 0.3, 0.45)
            broad[r] = v
        narrow, basin = _narrow(space, rng, broad, [p, c, b, t, ch, names.index("NCCL_SOCKET_NTHREADS")], 0.75, 0.5)

        def fails(r: tuple) -> bool:
            return (sockets(space, r) > 64 or (val(r, "NCCL_ALGO") == "Tree" and val(r, "NCCL_PROTO") == "LL")
                    or (val(r, "NCCL_NTHREADS") == "512" and val(r, "NCCL_MIN_NCHANNELS") in ("16", "32")))
    elif family == "heldout_b":
        a, p = names.index("NCCL_ALGO"), names.index("NCCL_PROTO")
        c, b, t = names.index("NCCL_MIN_NCHANNELS"), names.index("NCCL_BUFFSIZE"), names.index("NCCL_NTHREADS")
        ch = names.index("NCCL_P2P_NET_CHUNKSIZE")
        base = {(i, j): rng.uniform(0.45, 1.0) for i in range(3) for j in range(4)}
        cpeak, tpeak = {j: rng.random() for j in range(4)}, {i: rng.random() for i in range(3)}
        bc_peak, s_peak, chunk = rng.uniform(0.6, 1.4), rng.uniform(0.3, 0.9), rng.uniform(0.85, 1.1)
        for r in rows:
            v = base[(r[a], r[p])] * bump(pos[c](r[c]), cpeak[r[p]], 0.45, 0.55) * bump(pos[t](r[t]), tpeak[r[a]], 0.4, 0.5)
            v *= bump(pos[b](r[b]) + pos[c](r[c]), bc_peak, 0.5, 0.6) * (chunk if r[ch] else 1.0)  # buffers x channels
            v *= bump(math.log2(sockets(space, r)) / 6, s_peak, 0.35, 0.45)
            broad[r] = v
        narrow, basin = _narrow(space, rng, broad, [p, c, b, t, ch, names.index("NCCL_NSOCKS_PERTHREAD")], 0.72, 0.5)

        def fails(r: tuple) -> bool:
            return (sockets(space, r) > 64 or (val(r, "NCCL_ALGO") == "Tree" and val(r, "NCCL_PROTO") == "LL")
                    or (val(r, "NCCL_PROTO") == "LL128" and val(r, "NCCL_NTHREADS") == "64")
                    or (val(r, "NCCL_BUFFSIZE") == str(16 * M) and val(r, "NCCL_MIN_NCHANNELS") == "32"))
    elif family == "heldout_c":
        p, c, t = names.index("NCCL_PROTO"), names.index("NCCL_MAX_NCHANNELS"), names.index("NCCL_NTHREADS")
        b, q, g = names.index("NCCL_BUFFSIZE"), names.index("NCCL_IB_QPS_PER_CONNECTION"), names.index("NCCL_NET_GDR_LEVEL")
        n, sp = names.index("NCCL_P2P_NVL_CHUNKSIZE"), names.index("NCCL_IB_SPLIT_DATA_ON_QPS")
        base = {(i, j): rng.uniform(0.5, 1.0) for i in range(4) for j in range(4)}  # protocol x GDR level
        ridge = {i: rng.uniform(0.4, 1.6) for i in range(4)}  # channels + threads, per protocol
        bpeak, qpeak = {j: rng.random() for j in range(4)}, {i: rng.random() for i in range(2)}
        npeak, split = rng.random(), rng.uniform(0.85, 1.1)
        for r in rows:  # one Gaussian over a ridge and two coupled peaks, above a single floor
            e = ((pos[c](r[c]) + pos[t](r[t]) - ridge[r[p]]) / 0.55) ** 2 + ((pos[b](r[b]) - bpeak[r[g]]) / 0.7) ** 2
            e += ((pos[q](r[q]) - qpeak[r[sp]]) / 0.8) ** 2 + ((pos[n](r[n]) - npeak) / 0.9) ** 2
            broad[r] = base[(r[p], r[g])] * (split if r[sp] else 1.0) * (0.3 + 0.7 * math.exp(-e))
        narrow, basin = _narrow(space, rng, broad, [c, b, q, g, n], 0.78, 0.5, 0.35)

        def fails(r: tuple) -> bool:
            return ((val(r, "NCCL_IB_QPS_PER_CONNECTION") == "8" and val(r, "NCCL_IB_SPLIT_DATA_ON_QPS") == "1")
                    or (val(r, "NCCL_PROTO") == "LL" and val(r, "NCCL_BUFFSIZE") == str(32 * M))
                    or (val(r, "NCCL_NTHREADS") in ("256", "512") and val(r, "NCCL_MAX_NCHANNELS") in ("16", "32")
                        and val(r, "NCCL_NET_GDR_LEVEL") in ("PHB", "SYS")))  # a three-variable rule
    elif family == "heldout_d":
        a, p, c = names.index("NCCL_ALGO"), names.index("NCCL_PROTO"), names.index("NCCL_MIN_NCHANNELS")
        t, b, g = names.index("NCCL_NTHREADS"), names.index("NCCL_BUFFSIZE"), names.index("NCCL_NET_GDR_LEVEL")
        st = names.index("NCCL_SOCKET_NTHREADS")
        base = {(i, j): rng.uniform(-0.6, 0.0) for i in range(3) for j in range(4)}
        cpeak, tpeak, bpeak = {j: rng.random() for j in range(4)}, {i: rng.random() for i in range(3)}, {k: rng.random() for k in range(4)}
        s_peak, gdr = rng.uniform(0.3, 0.9), {k: rng.uniform(-0.15, 0.05) for k in range(4)}
        for r in rows:  # exp of a sum of pairwise terms
            e = base[(r[a], r[p])] + gdr[r[g]] - 0.5 * ((pos[c](r[c]) - cpeak[r[p]]) / 0.45) ** 2
            e -= 0.4 * ((pos[t](r[t]) - tpeak[r[a]]) / 0.5) ** 2 + 0.35 * ((pos[b](r[b]) - bpeak[r[g]]) / 0.6) ** 2
            e -= 0.5 * ((math.log2(sockets(space, r)) / 7 - s_peak) / 0.35) ** 2
            broad[r] = math.exp(max(e, -2.5))
        narrow, basin = _narrow(space, rng, broad, [p, c, t, b, g, st], 0.74, 0.48, 0.4, unset_ok=(p, c, g))

        def fails(r: tuple) -> bool:
            return (sockets(space, r) > 64 or (val(r, "NCCL_ALGO") == "Tree" and val(r, "NCCL_PROTO") == "LL")
                    or (val(r, "NCCL_PROTO") == "LL128" and val(r, "NCCL_NTHREADS") == "64")
                    or (val(r, "NCCL_NET_GDR_LEVEL") == "SYS" and val(r, "NCCL_BUFFSIZE") == str(16 * M)
                        and val(r, "NCCL_MIN_NCHANNELS") in ("16", "32")))
    elif family == "heldout_e":
        a, p, c = names.index("NCCL_ALGO"), names.index("NCCL_PROTO"), names.index("NCCL_MAX_NCHANNELS")
        t, b, q = names.index("NCCL_NTHREADS"), names.index("NCCL_BUFFSIZE"), names.index("NCCL_IB_QPS_PER_CONNECTION")
        base = {(i, j): rng.uniform(0.5, 1.0) for i in range(3) for j in range(4)}
        ridge, qpeak = {i: rng.uniform(0.5, 1.5) for i in range(3)}, {i: rng.random() for i in range(3)}
        tpeak, s_peak, floor = {j: rng.random() for j in range(4)}, rng.uniform(0.3, 0.9), rng.uniform(0.15, 0.35)
        for r in rows:  # additive: each bump adds its share above the floor
            terms = (bump(pos[c](r[c]) + pos[b](r[b]), ridge[r[a]], 0.45, 0.0), bump(pos[t](r[t]), tpeak[r[p]], 0.4, 0.0),
                     bump(pos[q](r[q]), qpeak[r[a]], 0.5, 0.0), bump(math.log2(sockets(space, r)) / 6, s_peak, 0.35, 0.0))
            broad[r] = base[(r[a], r[p])] * (floor + (1 - floor) * sum(terms) / len(terms))
        narrow, basin = _narrow(space, rng, broad, [p, c, t, b, q, names.index("NCCL_SOCKET_NTHREADS")], 0.76, 0.5, 0.38,
                         unset_ok=(p, c))

        def fails(r: tuple) -> bool:
            return (sockets(space, r) > 64 or (val(r, "NCCL_ALGO") == "Tree" and val(r, "NCCL_PROTO") == "LL128")
                    or (val(r, "NCCL_PROTO") == "LL" and val(r, "NCCL_NTHREADS") == "512")
                    or (val(r, "NCCL_BUFFSIZE") == str(16 * M) and val(r, "NCCL_IB_QPS_PER_CONNECTION") == "4"
                        and val(r, "NCCL_MAX_NCHANNELS") in ("16", "32")))
    elif family == "heldout_f":
        a, p, c = names.index("NCCL_ALGO"), names.index("NCCL_PROTO"), names.index("NCCL_MIN_NCHANNELS")
        t, b, g = names.index("NCCL_NTHREADS"), names.index("NCCL_BUFFSIZE"), names.index("NCCL_NET_GDR_LEVEL")
        st, x = names.index("NCCL_SOCKET_NTHREADS"), names.index("NCCL_CROSS_NIC")
        modes = []
        for share in (1.0, 0.85):  # two broad basins: the second with its own protocol and peaks
            modes.append((share, rng.randrange(4), {(i, j): rng.uniform(0.5, 1.0) for i in range(3) for j in range(4)},
                          {j: rng.random() for j in range(4)}, {i: rng.random() for i in range(3)},
                          {k: rng.random() for k in range(4)}, rng.uniform(0.3, 0.9), rng.uniform(0.85, 1.1)))
        for r in rows:
            v = 0.0
            for share, proto, base, cpeak, tpeak, bpeak, s_peak, cross in modes:
                m = share * base[(r[a], r[p])] * (1.0 if r[p] == proto else 0.8)
                m *= bump(pos[c](r[c]), cpeak[r[p]], 0.45, 0.5) * bump(pos[t](r[t]), tpeak[r[a]], 0.45, 0.55)
                m *= bump(pos[b](r[b]), bpeak[r[g]], 0.5, 0.55) * (cross if r[x] else 1.0)
                m *= bump(math.log2(sockets(space, r)) / 7, s_peak, 0.35, 0.45)
                v = max(v, m)
            broad[r] = v
        narrow, basin = _narrow(space, rng, broad, [p, c, t, b, g, st], 0.8, 0.55, 0.4, unset_ok=(g,))

        def fails(r: tuple) -> bool:
            return (sockets(space, r) > 64 or (val(r, "NCCL_CROSS_NIC") == "1" and val(r, "NCCL_NET_GDR_LEVEL") == "LOC")
                    or (val(r, "NCCL_ALGO") == "Ring" and val(r, "NCCL_PROTO") == "LL" and val(r, "NCCL_NTHREADS") == "512")
                    or (val(r, "NCCL_BUFFSIZE") == str(16 * M) and val(r, "NCCL_MIN_NCHANNELS") == "32"))
    elif family == "heldout_g":
        a, p, c = names.index("NCCL_ALGO"), names.index("NCCL_PROTO"), names.index("NCCL_MAX_NCHANNELS")
        t, b, q = names.index("NCCL_NTHREADS"), names.index("NCCL_BUFFSIZE"), names.index("NCCL_IB_QPS_PER_CONNECTION")
        ch, g = names.index("NCCL_P2P_NET_CHUNKSIZE"), names.index("NCCL_NET_GDR_LEVEL")
        base = {(i, j): rng.uniform(-0.7, 0.0) for i in range(3) for j in range(4)}
        gap = {j: rng.uniform(-0.4, 0.4) for j in range(4)}  # channels minus buffers, per protocol: a diagonal ridge
        tpeak, qpeak = {j: rng.random() for j in range(4)}, {k: rng.random() for k in range(4)}
        chunk = {i: (rng.uniform(-0.2, 0.1), rng.uniform(-0.2, 0.1)) for i in range(3)}
        for r in rows:  # exp of pairwise terms: a buffers x channels diagonal per protocol, threads per protocol, QPs per GDR
            e = base[(r[a], r[p])] - 0.6 * ((pos[c](r[c]) - pos[b](r[b]) - gap[r[p]]) / 0.4) ** 2
            e -= 0.45 * ((pos[t](r[t]) - tpeak[r[p]]) / 0.45) ** 2 + 0.4 * ((pos[q](r[q]) - qpeak[r[g]]) / 0.5) ** 2
            e += 0.0 if r[ch] == 0 else chunk[r[a]][r[ch] - 1]
            broad[r] = math.exp(max(e, -2.2))
        narrow, basin = _narrow(space, rng, broad, [p, c, t, b, q, g, ch], 0.72, 0.5, 0.36, unset_ok=(c, q))

        def fails(r: tuple) -> bool:
            return ((val(r, "NCCL_PROTO") == "LL128" and val(r, "NCCL_NTHREADS") == "64")
                    or (val(r, "NCCL_IB_QPS_PER_CONNECTION") == "8" and val(r, "NCCL_MAX_NCHANNELS") == "32")
                    or (val(r, "NCCL_PROTO") == "LL" and val(r, "NCCL_BUFFSIZE") == str(32 * M))
                    or (val(r, "NCCL_ALGO") == "Tree" and val(r, "NCCL_NET_GDR_LEVEL") == "SYS"
                        and val(r, "NCCL_NTHREADS") == "512"))  # a three-variable rule
    elif family == "heldout_h":
        a, p, c = names.index("NCCL_ALGO"), names.index("NCCL_PROTO"), names.index("NCCL_MIN_NCHANNELS")
        t, b, q = names.index("NCCL_NTHREADS"), names.index("NCCL_BUFFSIZE"), names.index("NCCL_IB_QPS_PER_CONNECTION")
        st, ch = names.index("NCCL_SOCKET_NTHREADS"), names.index("NCCL_P2P_NET_CHUNKSIZE")
        base = {(i, j): rng.uniform(-0.6, 0.0) for i in range(3) for j in range(4)}
        work = {(i, j): rng.uniform(0.5, 1.5) for i in range(3) for j in range(4)}  # channels + threads, per pair
        bpeak, chunk = {k: rng.random() for k in range(4)}, {j: (rng.uniform(-0.25, 0.1), rng.uniform(-0.25, 0.1)) for j in range(4)}
        s_peak = rng.uniform(0.3, 0.9)
        for r in rows:  # more channels want fewer threads: their sum is peaked per (algorithm, protocol)
            e = base[(r[a], r[p])] - 0.55 * ((pos[c](r[c]) + pos[t](r[t]) - work[(r[a], r[p])]) / 0.45) ** 2
            e -= 0.4 * ((pos[b](r[b]) - bpeak[r[q]]) / 0.5) ** 2
            e -= 0.35 * ((math.log2(sockets(space, r)) / 6 - s_peak) / 0.35) ** 2
            e += 0.0 if r[ch] == 0 else chunk[r[p]][r[ch] - 1]
            broad[r] = math.exp(max(e, -2.0))
        narrow, basin = _narrow(space, rng, broad, [a, p, c, t, b, q, st], 0.68, 0.45, 0.33, unset_ok=(p, t))

        def fails(r: tuple) -> bool:
            return (sockets(space, r) > 64 or (val(r, "NCCL_ALGO") == "Tree" and val(r, "NCCL_PROTO") == "LL128")
                    or (val(r, "NCCL_PROTO") == "LL" and val(r, "NCCL_NTHREADS") == "512"
                        and val(r, "NCCL_MIN_NCHANNELS") == "32")  # a three-variable rule
                    or (val(r, "NCCL_IB_QPS_PER_CONNECTION") == "4" and val(r, "NCCL_BUFFSIZE") == str(16 * M)))
    else:
        raise SystemExit(f"unknown family {family!r}")
    LAST_BASIN[(family, seed)] = basin
    top = max(broad.values())
    table: dict[tuple, Optional[float]] = {r: None if fails(r) else max(0.9 * broad[r] / top, narrow[r]) for r in rows}
    best = max(v for v in table.values() if v is not None)
    return space, {r: None if v is None else v / best for r, v in table.items()}


def bench_sampler(name: str, seed: int, space: SearchSpace, size: int) -> Any:
    """envmatrix's samplers by name, plus two baselines: ``descent`` (the structured descent alone, the default
    before issue 37) and ``tpe-group`` (Optuna's TPE with multivariate, group and constant_liar)."""
    import optuna

    if name == "descent":
        from envmatrix.search.structured import make_structured_sampler

        return make_structured_sampler(space.space.values, space.vars, space.is_forbidden, seed)
    if name == "tpe-group":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=10, multivariate=True, group=True, constant_liar=True)
    return make_sampler(name, seed, size, space)


def run_one(space: SearchSpace, table: dict, sampler: str, seed: int, trials: int) -> dict[str, Any]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    noise = random.Random(seed * 7919 + 1)
    order: list[tuple] = []
    measured: list[Optional[float]] = []

    def measure_row(row: tuple) -> float:
        return table[row] * (1 + noise.uniform(-NOISE, NOISE))

    def lookup(number: int, setup: Any) -> EvalOutcome:
        row = space.row_of({v: setup.assignments().get(v) for v in space.vars})
        order.append(row)
        if table[row] is None:
            measured.append(None)
            return EvalOutcome(None, "nccl_refused", "NCCL WARN refused the config")
        measured.append(measure_row(row))
        return EvalOutcome([measured[-1]])

    t0 = time.time()
    study = optuna.create_study(directions=["maximize"], sampler=bench_sampler(sampler, seed, space, len(table)))
    settings = SearchSettings(trials=trials, sampler=sampler, seed=seed, storage=None, study_name="bench", max_failure_rate=1.0,
                              heartbeat_interval_s=3600, heartbeat_grace_s=1e9, top_k=3, baseline=False, max_forbidden_streak=10_000)
    run_search(study, space, objectives=parse_objectives(None, "bench", ["1x1"]), evaluate=lookup, settings=settings)
    wall = time.time() - t0
    seen: dict[tuple, float] = {}
    for row, v in zip(order, measured):
        if v is not None:
            seen[row] = max(v, seen.get(row, -math.inf))
    row, base = exported_row(space, table, seen, measure_row)
    return {"score": table[row], "vs_default": table[row] / table[base], "failed": sum(v is None for v in measured),
            "probed": len(order), "wall": wall, "exported_fails": table[row] is None, "order": order}


def exported_row(space: SearchSpace, table: dict, seen: dict[tuple, float], measure_row: Callable[[tuple], float]) -> tuple[tuple, tuple]:
    """(exported row, default row): what `envmatrix search` exports from the rows measured in full (``seen``: row ->
    best measured value): the top 3 and the default env re-measured in 3 interleaved rounds, the confirmed winner."""
    top = sorted(seen, key=lambda r: -seen[r])[:3]
    base = default_row(space, table)
    labels = list(range(len(top))) + [DEFAULT]
    c = confirm(labels, lambda r, lab: measure_row(base if lab == DEFAULT else top[lab]), repeats=3, max_repeats=3)
    return (base if c.decision.winner == DEFAULT else top[c.decision.winner]), base


RECORDED_1X4 = REPO / "benchmarks" / "results" / "h200_search" / "exhaustive_1x4.sqlite.gz"


def recorded_tables(size: str) -> tuple[dict, dict]:
    """The recorded 1x4 H200 landscape (48 configs, benchmarks/search_efficiency_h200.md): its objective (allreduce x2
    + allgather busbw, geometric mean) at 256M and the same objective at ``size``, per config."""
    from search_efficiency import load_search, table_from_store

    from envmatrix.paths import conf_dir

    space, objectives, grids = load_search(conf_dir() / "search_h200_1x4.yaml")
    cheap = parse_objectives({"collectives": ["allreduce", "allgather"], "size": size, "weights": {"allreduce": 2}}, "cheap", grids)
    full = {r: v[0] for r, v in table_from_store(RECORDED_1X4, space, objectives).items()}
    return {r: v[0] for r, v in table_from_store(RECORDED_1X4, space, cheap).items()}, full


def _recorded_db(path: Path) -> Any:
    """The recorded store, unzipped into memory (sqlite3 connection)."""
    import gzip
    import sqlite3

    db = sqlite3.connect(":memory:")
    db.deserialize(gzip.decompress(path.read_bytes()))
    return db


def recorded_probe_costs() -> list[str]:
    """What a cheaper fidelity could save on the recorded H200 landscapes: a probe's wall time (launch, NCCL init,
    bench, teardown) against its timed iterations at the objective's 256M (warm-up included)."""
    lines = ["| recorded landscape | probes | probe wall s (median) | 256M iterations s (median) | their share |", "|---|---|---|---|---|"]
    for grid in ("1x4", "2x2"):
        db = _recorded_db(RECORDED_1X4.with_name(f"exhaustive_{grid}.sqlite.gz"))
        walls, timed = [], []
        for seq, started, finished in db.execute("SELECT seq, started, finished FROM results WHERE outcome = 'pass'"):
            walls.append(float(finished) - float(started))
            timed.append(sum(t * (json.loads(j)["iters"] + 5) for t, j in db.execute(
                "SELECT time_us, row_json FROM metrics WHERE seq = ? AND size_bytes = ?", (seq, 256 * M))) / 1e6)
        lines.append(f"| H200 {grid} | {len(walls)} | {statistics.median(walls):.1f} | {statistics.median(timed):.2f} | "
                     f"{statistics.median(timed) / statistics.median(walls):.0%} |")
    return lines


def recorded_latency_shares() -> list[float]:
    """Per (config, collective) of the recorded 1x4 landscape: the share of a 16M iteration that does not scale with
    the size (t = a + s/b fitted through 16M and 256M), clipped at 0 (noise makes a few slightly negative)."""
    times: dict[tuple, dict[int, float]] = {}
    for seq, coll, size, t in _recorded_db(RECORDED_1X4).execute("SELECT seq, collective, size_bytes, time_us FROM metrics"):
        times.setdefault((seq, coll), {})[int(size)] = float(t)
    small, big = 16 * M, 256 * M
    out = []
    for t in times.values():
        if small in t and big in t:
            per_byte = (t[big] - t[small]) / (big - small)
            out.append(max(0.0, (t[small] - per_byte * small) / t[small]))
    return out


def cheap_tables(family: str, seed: int, shares: list[float]) -> tuple[dict, dict, dict]:
    """(16M, 5 iterations, full) noise-free-ish values of the allowed working configs of one landscape.
    16M: each (ALGO, PROTO, MIN_ or MAX_NCHANNELS) cell gets a latency share drawn from the recorded 1x4 shares, so a 16M
    measurement is full x (1 - share); 5 iterations instead of 20: the full value with twice the +-3% noise."""
    space, table = family_table(family, seed)
    rng = random.Random(f"fidelity-{family}-{seed}")
    names = list(space.vars)
    channels = "NCCL_MIN_NCHANNELS" if "NCCL_MIN_NCHANNELS" in names else "NCCL_MAX_NCHANNELS"
    cell = [names.index(v) for v in ("NCCL_ALGO", "NCCL_PROTO", channels)]
    share: dict[tuple, float] = {}
    full = {r: v for r, v in table.items() if v is not None}
    small = {}
    for r, v in full.items():
        key = tuple(r[k] for k in cell)
        if key not in share:
            share[key] = rng.choice(shares)
        small[r] = v * (1 - share[key]) * (1 + rng.uniform(-NOISE, NOISE))
    few = {r: v * (1 + rng.uniform(-2 * NOISE, 2 * NOISE)) for r, v in full.items()}
    return small, few, full


def fidelity_report(families: list[str], seeds: range) -> list[str]:
    """Does a cheap fidelity rank configs as the full one does? Spearman over every working config and over the
    top 5% or 10 configs (where a search decides), the full best's rank under the cheap one, and the regret of trusting it."""
    from envmatrix.search.fidelity import compare

    lines = ["| landscape | cheap fidelity | configs | rank correlation (all) | rank correlation (top 5%, >= 10 configs) | "
             "full best's rank by cheap | regret of the cheap winner |", "|---|---|---|---|---|---|---|"]

    def row(name: str, fid: str, cheap: dict, full: dict) -> str:
        top = sorted(full, key=full.get)[-max(10, len(full) // 20):]
        allc, topc = compare(cheap, full), compare({r: cheap[r] for r in top}, {r: full[r] for r in top})
        return f"| {name} | {fid} | {allc.configs} | {allc.rho:.3f} | {topc.rho:.3f} | {allc.best_rank} | {allc.regret:.3f} |"

    for size in ("16M", "1M"):
        cheap, full = recorded_tables(size)
        lines.append(row("recorded H200 1x4 (objective at 256M)", f"{size}, 20 iterations", cheap, full))
    shares = recorded_latency_shares()
    for family in families:
        per: dict[str, list] = {"16M (recorded latency shares)": [], "5 iterations (+-6% noise)": []}
        for seed in seeds:
            small, few, full = cheap_tables(family, seed, shares)
            per["16M (recorded latency shares)"].append((small, full))
            per["5 iterations (+-6% noise)"].append((few, full))
        for fid, pairs in per.items():
            rows = [row(family, fid, c, f) for c, f in pairs]
            cells = [r.strip("|").split("|") for r in rows]
            med = lambda i: statistics.median(float(c[i]) for c in cells)  # noqa: E731
            lines.append(f"| {family}, seeds {seeds.start}-{seeds.stop - 1} (median) | {fid} | {cells[0][2].strip()} | "
                         f"{med(3):.3f} | {med(4):.3f} | {statistics.median(int(c[5]) for c in cells):.0f} | {med(6):.3f} |")
    return lines + [""] + recorded_probe_costs()


def _auc(pos: list[float], neg: list[float]) -> Optional[float]:
    if not pos or not neg:
        return None
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))


def attraction_report(families: list[str], seeds: range, starts: int = 20) -> list[str]:
    """Why the scale plan reaches the basin on only about half the seeds (an analysis with the optimum known):
    the share of allowed rows whose steepest one-knob climb ends at >= 0.95 (the basin's attraction), how well a
    row's measured value among the plan's 70 explored rows tells the attraction rows (AUC), and random-start
    first-improvement climbs in the plan's step order: reach rate, probes per climb, and what that rate buys in the
    80 trials left after exploration; and on how many seeds the 70 explored rows hold any row of that attraction at
    all (no conversion of the explored rows can do better than that share)."""
    from envmatrix.search import scale
    from envmatrix.search.structured import Layout

    lines = ["| family | seeds | attraction share (median) | AUC of value among the 70 explored rows (median) "
             "| climb reaches 0.95 | probes per climb | reach within 80 probes of climbs (implied) "
             "| seeds whose explored rows hold an attraction row |", "|---|---|---|---|---|---|---|---|"]
    explored_n = scale.EXPLORE + scale.ELITE_SAMPLES
    for family in families:
        shares, aucs, hits, probes, held = [], [], 0, [], 0
        for seed in seeds:
            space, table = family_table(family, seed)
            layout = Layout.of(space.space.values)
            ok = {r: v for r, v in table.items() if v is not None and not space.is_forbidden(r)}
            step = {}
            for r, v in ok.items():
                step[r] = max((n for n in scale.neighbours(layout, r, random.Random(0), {}) if n in ok), key=ok.get, default=r)
                if ok[step[r]] <= v:
                    step[r] = r
            end: dict[tuple, tuple] = {}
            for r in ok:
                path = [r]
                while path[-1] not in end and step[path[-1]] != path[-1]:
                    path.append(step[path[-1]])
                top = end.get(path[-1], path[-1])
                end.update((p, top) for p in path)
            shares.append(sum(ok[end[r]] >= 0.95 for r in ok) / len(ok))
            noise, measured = random.Random(seed * 7919 + 1), {}
            for _ in range(explored_n):
                row = scale.next_row(layout, measured, (), space.is_forbidden, seed, ())
                measured[row] = None if table[row] is None else table[row] * (1 + noise.uniform(-NOISE, NOISE))
            good = {r: v for r, v in measured.items() if v is not None}
            auc = _auc([good[r] for r in good if ok[end[r]] >= 0.95], [good[r] for r in good if ok[end[r]] < 0.95])
            if auc is not None:
                aucs.append(auc)
            held += any(ok[end[r]] >= 0.95 for r in good)
            effect, rng, rows = scale.main_effects(list(good), good), random.Random(seed), list(ok)
            for _ in range(starts):
                cur = rng.choice(rows)
                seen = {cur}
                while True:
                    nxt = None
                    for n in scale.neighbours(layout, cur, random.Random(f"{seed}-{cur}"), effect):
                        if n in ok or table.get(n, 0) is None:
                            seen.add(n)
                        if ok.get(n, -1.0) > ok[cur]:
                            nxt = n
                            break
                    if nxt is None:
                        break
                    cur = nxt
                hits += ok[cur] >= 0.95
                probes.append(len(seen))
        rate, cost = hits / (starts * len(seeds)), statistics.mean(probes)
        implied = 1 - (1 - rate) ** (80 / cost)
        lines.append(f"| {family} | {seeds.start}-{seeds.stop - 1} | {statistics.median(shares):.3f} | {statistics.median(aucs):.2f} | "
                     f"{rate:.3f} | {cost:.0f} | {implied:.2f} | {held}/{len(seeds)} |")
        print(lines[-1], flush=True)
    return lines


def modes_report(families: list[str], seeds: range, trials: int) -> list[str]:
    """Why a seed's search missed 0.95 (an analysis with the basin known): the best measured row holds the basin's
    three values but sits below 0.95 (stuck inside the basin: its other variables are at a local optimum, e.g. a
    coupled algorithm x protocol pair), some measured row held the three values but no climb went from it
    (not climbed), or no measured row ever held them (never measured). ``found``: a measured row >= 0.95."""
    lines = ["| family | seeds | found | stuck inside the basin | a basin row measured, not climbed | never measured a basin row "
             "| first basin row's trial (median, of those not climbed) |", "|---|---|---|---|---|---|---|"]
    for family in families:
        modes: dict[str, int] = {"found": 0, "stuck": 0, "not climbed": 0, "never": 0}
        firsts = []
        for seed in seeds:
            space, table = family_table(family, seed)
            basin = LAST_BASIN[(family, seed)]
            order = [r for r in run_one(space, table, "structured", seed, trials)["order"] if table[r] is not None]
            holds = [i for i, r in enumerate(order) if all(r[k] == v for k, v in basin.items())]
            top = max(order, key=table.get)
            if table[top] >= 0.95:
                modes["found"] += 1
            elif all(top[k] == v for k, v in basin.items()):
                modes["stuck"] += 1
            elif holds:
                modes["not climbed"] += 1
                firsts.append(holds[0])
            else:
                modes["never"] += 1
        first = f"{statistics.median(firsts):.0f}" if firsts else "-"
        lines.append(f"| {family} | {seeds.start}-{seeds.stop - 1} | {modes['found']} | {modes['stuck']} | {modes['not climbed']} "
                     f"| {modes['never']} | {first} |")
        print(lines[-1], flush=True)
    return lines


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--families", default="scale8")
    ap.add_argument("--samplers", default="structured,tpe,scale")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed+seeds-1")
    ap.add_argument("--trials", type=int, default=150)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--fidelity", action="store_true", help="rank correlation of cheap fidelities instead of searches")
    ap.add_argument("--attraction", action="store_true", help="the basin's attraction and random-start climbs instead of searches")
    ap.add_argument("--modes", action="store_true", help="why each seed missed 0.95 (basin known) instead of the score table")
    args = ap.parse_args(argv)
    if args.modes:
        text = "\n".join(modes_report(args.families.split(","), range(args.first_seed, args.first_seed + args.seeds), args.trials)) + "\n"
        if args.out:
            args.out.write_text(text)
        return 0
    if args.attraction:
        text = "\n".join(attraction_report(args.families.split(","), range(args.first_seed, args.first_seed + args.seeds))) + "\n"
        if args.out:
            args.out.write_text(text)
        return 0
    if args.fidelity:
        text = "\n".join(fidelity_report(args.families.split(","), range(args.first_seed, args.first_seed + args.seeds))) + "\n"
        print(text, end="")
        if args.out:
            args.out.write_text(text)
        return 0
    lines = ["| family | configs | failing | sampler | median exported/optimum | worst seed | seeds >= 0.95 | worst exported/default "
             "| failed trials (median) | exported a failing env | wall s/run (median) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for family in args.families.split(","):
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        tables = [family_table(family, seed) for seed in seeds]
        for sampler in args.samplers.split(","):
            runs = [run_one(space, table, sampler, seed, args.trials) for seed, (space, table) in zip(seeds, tables)]
            scores = [r["score"] for r in runs]
            size = len(tables[0][1])
            failing = sum(v is None for v in tables[0][1].values()) / size
            lines.append(f"| {family} | {size} | {failing:.0%} | {sampler} | {statistics.median(scores):.3f} | {min(scores):.3f} | "
                         f"{sum(s >= 0.95 for s in scores)}/{len(scores)} | {min(r['vs_default'] for r in runs):.2f} | "
                         f"{statistics.median(r['failed'] for r in runs):.0f} | {sum(r['exported_fails'] for r in runs)} | "
                         f"{statistics.median(r['wall'] for r in runs):.1f} |")
            print(lines[-1], "scores:", " ".join(f"{s:.3f}" for s in scores), flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
