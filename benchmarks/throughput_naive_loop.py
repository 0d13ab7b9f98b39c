"""The naive baseline of issue 14: ``for each setup: mpirun -np N -x VARS python probe.py``.

Driver mode (default): runs every setup of a YAML ``setups:`` map (or --setup
NAME=VAR=V,VAR=V) through mpirun, one after another, and writes one JSON line
per config (name, exit code, wall seconds) plus a summary. Probe mode
(``--probe``, what mpirun starts): init NCCL or gloo from OMPI_* rank vars and
value-check allreduce/allgather/alltoall on 4096 floats, like envmatrix's
default probe. Nothing from envmatrix is imported, so it stays a fair baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time


def probe(backend: str, nodes: int = 1) -> int:
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
    local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", rank))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if nodes > 1:  # what a user emulating N nodes on one box writes by hand: a host id per node, NCCL reads it at init
        os.environ["NCCL_HOSTID"] = f"naive-node{rank // max(1, world // nodes)}"
    if backend == "nccl":
        dev = torch.device("cuda", local % torch.cuda.device_count())  # more ranks than GPUs: they share
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    else:
        dev = torch.device("cpu")
        dist.init_process_group("gloo", rank=rank, world_size=world)
    n = 4096
    buf = torch.full((n,), float(rank + 1), device=dev)
    dist.all_reduce(buf)
    bad = int((buf != world * (world + 1) / 2).sum().item())
    outs = [torch.empty(n, device=dev) for _ in range(world)]
    dist.all_gather(outs, torch.full((n,), float(rank), device=dev))
    bad += sum(int((o != i).sum().item()) for i, o in enumerate(outs))
    c = n // world
    send = torch.cat([torch.full((c,), float(rank * world + j), device=dev) for j in range(world)])
    got = torch.empty_like(send)
    dist.all_to_all_single(got, send)
    want = torch.cat([torch.full((c,), float(i * world + rank), device=dev) for i in range(world)])
    bad += int((got != want).sum().item())
    if dev.type == "cuda":
        torch.cuda.synchronize()
    dist.destroy_process_group()
    print(f"rank {rank}: {'OK' if not bad else f'{bad} wrong'}", flush=True)
    return 0 if not bad else 3


def load_setups(path: str) -> dict[str, dict[str, str]]:
    import yaml

    with open(path) as fh:
        data = yaml.safe_load(fh)
    return {name: {k: str(v) for k, v in (env or {}).items()} for name, env in data["setups"].items()}


def port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def drive(args: argparse.Namespace) -> int:
    setups = load_setups(args.conf)
    if args.only:
        setups = {k: v for k, v in setups.items() if k in args.only.split(",")}
    walls, failed = [], 0
    t_all = time.perf_counter()
    for name, env in setups.items():
        full = {**env, "MASTER_PORT": str(port()), **({"CUDA_VISIBLE_DEVICES": args.devices} if args.devices else {})}
        argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(args.np), "--bind-to", "none"]
        for k, v in full.items():
            argv += ["-x", f"{k}={v}"]
        for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "PYTHONPATH", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
            if k in os.environ and k not in full:
                argv += ["-x", k]
        argv += [sys.executable, os.path.abspath(__file__), "--probe", "--backend", args.backend, "--nodes", str(args.nodes)]
        t0 = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=args.timeout, shell=False)
        wall = time.perf_counter() - t0
        walls.append(wall)
        failed += done.returncode != 0
        print(json.dumps({"setup": name, "rc": done.returncode, "wall_s": round(wall, 3)}), flush=True)
        if done.returncode and args.verbose:
            print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
    total = time.perf_counter() - t_all
    print(json.dumps({"summary": "naive", "configs": len(walls), "failed": failed, "total_s": round(total, 2),
                      "configs_per_min": round(60 * len(walls) / total, 2), "median_wall_s": round(statistics.median(walls), 3)}), flush=True)
    return 1 if failed else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--probe", action="store_true", help="rank mode (started by mpirun)")
    p.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    p.add_argument("--conf", help="YAML with a setups: map")
    p.add_argument("--only", help="comma-separated setup names")
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--nodes", type=int, default=1, help="emulated nodes (NCCL_HOSTID per node; ranks share GPUs round-robin)")
    p.add_argument("--devices", help="CUDA_VISIBLE_DEVICES for every run")
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    return probe(args.backend, args.nodes) if args.probe else drive(args)


if __name__ == "__main__":
    sys.exit(main())
