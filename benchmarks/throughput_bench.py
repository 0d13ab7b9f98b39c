"""Interleaved throughput: envmatrix sweep (pool), --no-pool and the naive mpirun loop, round by round.

Each round runs every side once on the same setups (so drift in machine load
hits all sides alike). configs/min counts the whole command's wall (driver
start, pool warm-up included); per-config wall is each run's own duration
(envmatrix: results.json duration_s; naive: the mpirun call).
--grid takes a comma list (1x2,1x1): every round then runs every grid's sides
in turn, so the grids are interleaved too. The summary states the config count.
Sides: pool, pool_exit (pool + probe.teardown=exit), pool_preinit (pool + ENVMATRIX_POOL_CUDA_PREINIT=1: the child
for the next run makes its CUDA context ahead, GPU only), no_pool, naive; with --before DIR also pool_before: the pool side
run from another checkout's envmatrix (PYTHONPATH=DIR, e.g. `git archive HEAD | tar -x -C DIR`), so a
change is measured against its parent in the same rounds. Per envmatrix side the summary also gives the round's first
config (it waits for the pool servers' torch import) apart from the median of the others.
usage: python benchmarks/throughput_bench.py --conf C --grid 1x2[,1x1] --backend gloo --rounds 2 --out DIR [--sides pool,no_pool,naive] [--jobs auto]
       [--emulate-hosts] [--before DIR]   (envmatrix with emulated hosts; the naive loop gets --nodes N: NCCL_HOSTID per node, shared GPUs)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def envmatrix_side(args, grid: str, side: str, rnd: int) -> dict:
    out = os.path.join(os.path.abspath(args.out), f"{grid}_{side}_r{rnd}")
    argv = [sys.executable, "-m", "envmatrix", "sweep", f"conf={args.conf}", f"grids=[{grid}]", f"backend={args.backend}",
            "--out", out, "--rerun", "--allow-unknown-vars"]
    if args.backend == "gloo":  # the CPU stand-in runs the NCCL setups unchanged: gloo ignores their variables, knowingly
        argv.append("--allow-ignored-vars")
    if side == "no_pool":
        argv.append("--no-pool")
    if side == "pool_exit":  # the pool, ranks exiting without destroy_process_group (probe.teardown=exit)
        argv.append("probe.teardown=exit")
    if args.jobs:
        argv += ["--jobs", args.jobs]
    if args.emulate_hosts:
        argv.append("--emulate-hosts")
    env, cwd = None, None
    if side == "pool_before":  # run from DIR: `python -m` puts the working directory first on sys.path
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (args.before, os.environ.get("PYTHONPATH")) if p)}
        cwd = args.before
    if side in ("pool", "pool_preinit"):  # the plain pool without the context made ahead (on by default on a GPU)
        env = {**os.environ, "ENVMATRIX_POOL_CUDA_PREINIT": "1" if side == "pool_preinit" else "0"}
    t0, wall0 = time.perf_counter(), time.time()
    done = subprocess.run(argv, capture_output=True, text=True, shell=False, env=env, cwd=cwd)
    total = time.perf_counter() - t0
    # exit 1 only means a cell failed (the exit-code convention): its results still count as configs run
    results = json.load(open(os.path.join(out, "results.json")))["results"] if done.returncode in (0, 1) else []
    results.sort(key=lambda r: r.get("started_at") or 0)
    walls = [r["duration_s"] for r in results]
    starts = sorted({k["versions"].get("start", "?") for r in results for k in r["ranks"] if k.get("versions")})
    return {"side": side, "round": rnd, "rc": done.returncode, "configs": len(results), "failed": sum(r["outcome"] != "pass" for r in results),
            "total_s": round(total, 2), "configs_per_min": round(60 * len(results) / total, 2) if results else 0,
            "median_wall_s": round(statistics.median(walls), 3) if walls else None, "start": starts,
            "first_wall_s": walls[0] if walls else None,
            "rest_median_wall_s": round(statistics.median(walls[1:]), 3) if len(walls) > 1 else None,
            "rest_rank_timings_s": rank_timings(results[1:]),
            "first_rank_timings_s": rank_timings(results[:1]),
            # the command's total = before the first run + the runs (and the driver between them) + after the last
            "before_first_run_s": round(results[0]["started_at"] - wall0, 3) if results else None,
            "after_last_run_s": round(wall0 + total - results[-1]["started_at"] - results[-1]["duration_s"], 3) if results else None,
            "err": done.stderr[-800:] if done.returncode else ""}


def rank_timings(results: list) -> dict:
    """Median per phase over every rank of these runs (the rank's own clock: init, checks, teardown, its whole main)
    and, per run, what is outside the slowest rank's main (fork, exit, the driver's own work): where a config goes."""
    phases = {}
    for key in ("init_s", "collectives_s", "teardown_s", "total_s"):
        vals = [k["timings"][key] for r in results for k in r["ranks"] if key in (k.get("timings") or {})]
        if vals:
            phases[key] = round(statistics.median(vals), 4)
    outside = [r["duration_s"] - max(k["timings"]["total_s"] for k in r["ranks"]) for r in results
               if r["ranks"] and all("total_s" in (k.get("timings") or {}) for k in r["ranks"])]
    if outside:
        phases["outside_rank_main_s"] = round(statistics.median(outside), 4)
    prepared = [k["pool_prepared"]["cuda_init_s"] for r in results for k in r["ranks"] if k.get("pool_prepared")]
    if prepared:
        phases["cuda_made_ahead"] = f"{len(prepared)} ranks, median {statistics.median(prepared):.3f} s"
    return phases


def naive_side(args, grid: str, rnd: int) -> dict:
    nodes, ppn = (int(x) for x in grid.split("x"))
    argv = [sys.executable, os.path.join(HERE, "throughput_naive_loop.py"), "--conf", args.conf, "--backend", args.backend, "--np", str(nodes * ppn),
            "--nodes", str(nodes)]
    done = subprocess.run(argv, capture_output=True, text=True, shell=False)
    lines = [json.loads(l) for l in done.stdout.splitlines() if l.startswith("{")]
    summary = next((l for l in lines if l.get("summary")), {})
    return {"side": "naive", "round": rnd, "rc": done.returncode, **{k: v for k, v in summary.items() if k != "summary"},
            "err": done.stderr[-800:] if done.returncode else ""}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--conf", required=True)
    p.add_argument("--grid", default="1x2")
    p.add_argument("--backend", default="gloo")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--sides", default="pool,no_pool,naive")
    p.add_argument("--jobs")
    p.add_argument("--emulate-hosts", action="store_true", help="envmatrix sides run with --emulate-hosts (ranks may share GPUs)")
    p.add_argument("--before", metavar="DIR", help="adds the side pool_before: envmatrix imported from DIR (an older checkout)")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = []
    grids, sides = args.grid.split(","), args.sides.split(",")
    if args.before and "pool_before" not in sides:
        sides.insert(1, "pool_before")
    with open(os.path.join(args.out, "rows.jsonl"), "a") as fh:
        for rnd in range(args.rounds):
            for grid in grids:
                # alternate who goes first, so a warming machine does not favour one side
                for side in sides if rnd % 2 == 0 else sides[::-1]:
                    row = naive_side(args, grid, rnd) if side == "naive" else envmatrix_side(args, grid, side, rnd)
                    row.update(grid=grid, backend=args.backend, jobs=args.jobs)
                    rows.append(row)
                    fh.write(json.dumps(row) + "\n")
                    print(json.dumps(row), flush=True)
    for grid in grids:
        naive = [r["configs_per_min"] for r in rows if r["grid"] == grid and r["side"] == "naive" and r.get("configs_per_min")]
        for side in sides:
            mine = [r for r in rows if r["grid"] == grid and r["side"] == side]
            cpm = statistics.median([r.get("configs_per_min") or 0 for r in mine])
            med = statistics.median([r.get("median_wall_s") or 0 for r in mine])
            totals = "/".join(f"{r.get('total_s', 0):.1f}" for r in mine)
            ratio = f"{cpm / statistics.median(naive):.2f}x naive" if naive else ""
            first = "/".join(f"{r['first_wall_s']:.2f}" for r in mine if r.get("first_wall_s") is not None)
            rest = "/".join(f"{r['rest_median_wall_s']:.3f}" for r in mine if r.get("rest_median_wall_s") is not None)
            split = f"  first config {first} s, the others' median {rest} s" if first else ""
            last = mine[-1]
            if last.get("rest_rank_timings_s"):
                split += (f"\n    last round: {last['before_first_run_s']} s before the first run, {last['after_last_run_s']} s after the"
                          f" last; first config per rank {last['first_rank_timings_s']}; the others per rank (median)"
                          f" {last['rest_rank_timings_s']}")
            print(f"{args.backend} {grid} jobs={args.jobs or 1} {side:11s} {mine[0].get('configs', 0)} configs, rounds' totals {totals} s, "
                  f"configs/min {cpm:6.2f}  median per-config wall {med:6.2f}s  {ratio}{split}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
