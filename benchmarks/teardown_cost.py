"""What a rank's NCCL teardown costs the run around it (issue 14): time from "verdict written" to the
process reaped by its parent, per way of ending a rank. One GPU is enough (world 1 per process).

    python benchmarks/teardown_cost.py --repeats 5       (NVLS pins set by benchmarks/box_env.sh)

Modes: destroy = dist.destroy_process_group() then os._exit (what the probe does today);
exit = os._exit right after the verdict (the CUDA driver frees the context at process exit);
abort = the communicator's abort (torch's _abort on the NCCL backend) then os._exit.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CHILD = r"""
import os, sys, time
mode = sys.argv[1]
import torch, torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2], RANK="0", WORLD_SIZE="1")
t0 = time.perf_counter()
torch.cuda.set_device(0)
dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
x = torch.ones(4096, device="cuda")
for _ in range(3):
    dist.all_reduce(x); dist.all_gather_into_tensor(torch.empty(4096, device="cuda"), x)
torch.cuda.synchronize()
init_and_checks = time.perf_counter() - t0
print(f"VERDICT {time.time():.6f} {init_and_checks:.3f}", flush=True)
if mode == "destroy":
    dist.destroy_process_group()
elif mode == "abort":
    pg = dist.distributed_c10d._get_default_group()
    backend = pg._get_backend(torch.device("cuda", 0))
    getattr(backend, "abort", getattr(backend, "_abort", lambda: None))()
os._exit(0)
"""


def one(mode: str, port: int) -> dict:
    started = time.time()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, mode, str(port)], stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=120)
    reaped = time.time()
    verdict = [l for l in out.splitlines() if l.startswith("VERDICT ")]
    if proc.returncode != 0 or not verdict:
        return {"mode": mode, "rc": proc.returncode, "error": out[-400:]}
    _, at, init_checks = verdict[0].split()
    return {"mode": mode, "rc": 0, "whole_s": reaped - started, "init_and_checks_s": float(init_checks),
            "verdict_to_reaped_s": reaped - float(at)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--modes", default="destroy,exit,abort")
    args = ap.parse_args()
    modes = args.modes.split(",")
    rows, port = [], 29600
    for r in range(args.repeats):
        for mode in modes[r % len(modes):] + modes[: r % len(modes)]:  # rotate who goes first
            port += 1
            rows.append({"repeat": r, **one(mode, port)})
            print(json.dumps(rows[-1]), flush=True)
    print("| mode | verdict -> reaped (median, min-max) | whole process (median) | failures |")
    print("| --- | --- | --- | --- |")
    for mode in modes:
        ok = [x for x in rows if x["mode"] == mode and x["rc"] == 0]
        tail = [x["verdict_to_reaped_s"] for x in ok]
        whole = [x["whole_s"] for x in ok]
        fails = sum(1 for x in rows if x["mode"] == mode and x["rc"] != 0)
        if tail:
            print(f"| {mode} | {statistics.median(tail):.3f} s ({min(tail):.3f}-{max(tail):.3f}) | "
                  f"{statistics.median(whole):.2f} s | {fails} |")
        else:
            print(f"| {mode} | - | - | {fails} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
