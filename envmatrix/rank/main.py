"""Entry point of one built-in probe rank: ``python -m envmatrix.rank.main``.

The only place torch is imported. It reports progress by atomically replacing
``rank{R}.json`` at each phase, so a rank that hangs or dies still tells the
driver how far it got.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any, Mapping, Optional

from envmatrix.boundary import LAUNCHER_RANK_VARS, RESULT_DIR_VAR, echoed_env, rank_report_path, rank_var_names
from envmatrix.rank.identity import gpu_identity, host_identity, rank_identity
from envmatrix.rank.store_wait import wait_for_rank0_store
from envmatrix.results import clipped

WRONG_RESULT_EXIT = 3
# "pooled" when forked from a warm pool server (envmatrix.execution.pool_server).
START_MODE = "cold"
# What a pool server made ahead in this child before its run's env came (prepare_cuda), said in the rank report.
PREPARED: dict[str, Any] = {}
# Read only once CUDA's context exists (NCCL reads NCCL_* at communicator init, torch.distributed its rendezvous
# variables at init_process_group, this module ENVMATRIX_*): runs that differ only in these may share a context made
# ahead. Everything else (CUDA_*, PYTORCH_*, TORCH_*, LD_* ...) must be equal.
READ_AFTER_CUDA_INIT_PREFIXES = ("NCCL_", "ENVMATRIX_")
READ_AFTER_CUDA_INIT = frozenset(
    {"MASTER_ADDR", "MASTER_PORT"} | {name for names in LAUNCHER_RANK_VARS["torchrun"] for name in names})
CUDA_COMPUTE_MODE_ATTR, CUDA_COMPUTE_MODE_DEFAULT = 20, 0  # CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, CU_COMPUTEMODE_DEFAULT
# What versions say where there is no NCCL to name (a CPU build of torch), rather than leaving the key out.
NO_NCCL_IN_TORCH = "none (torch built without NCCL)"
NO_NCCL_MAPPED = "none (no libnccl.so mapped)"


class Reporter:
    def __init__(self, result_dir: str, rank: int) -> None:
        self.path = rank_report_path(result_dir, rank)
        self.data: dict[str, Any] = {"rank": rank, "pid": os.getpid(), "phase": "start", "timings": {}, "checks": []}
        self.seq = 0

    def enter(self, collective: str) -> int:
        """Mark the collective this rank is about to run, so a hang names it (and its sequence number)."""
        self.seq += 1
        self.data["progress"] = {"collective": collective, "seq": self.seq, "since": time.time()}
        self.flush()
        return self.seq

    def launched(self) -> None:
        """Mark that the entered collective returned to Python: enqueued (NCCL returns at once), or done (gloo).
        A rank blocked past this mark waits for the collective's result; one blocked before it never joined."""
        self.data["progress"]["launched"] = True
        self.flush()

    def phase(self, name: str, **extra: Any) -> None:
        self.data["phase"] = name
        self.data.update(extra)
        self.flush()

    def flush(self) -> None:
        tmp = f"{self.path}.tmp{os.getpid()}"
        with open(tmp, "w") as fh:
            json.dump(self.data, fh, default=str)
        os.replace(tmp, self.path)


def loaded_libraries(markers: tuple[str, ...] = ("libnccl", "nccl-net", "libnccl-tuner")) -> list[str]:
    """Shared objects really mapped into this process (what LD_* setups actually got)."""
    found: list[str] = []
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.split()[-1] if "/" in line else ""
                if path and any(m in os.path.basename(path) for m in markers) and path not in found:
                    found.append(path)
    except OSError:
        pass
    return found


def nccl_version_of(path: str) -> str | None:
    import ctypes

    try:
        lib = ctypes.CDLL(path)
        version = ctypes.c_int(0)
        if lib.ncclGetVersion(ctypes.byref(version)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    code = version.value
    major, rest = divmod(code, 10000) if code >= 10000 else divmod(code, 1000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def nccl_torch_built(dist: Any, torch: Any) -> str:
    """The NCCL version torch was built with (torch.cuda.nccl.version() raises in a build without it)."""
    if not dist.is_nccl_available():
        return NO_NCCL_IN_TORCH
    return ".".join(map(str, torch.cuda.nccl.version()))


def loaded_nccl() -> dict[str, Any]:
    """versions' keys for the NCCL and NET plugins this process has mapped. torch's import maps its libnccl, a NET
    plugin comes only at communicator init: read before init_process_group (what a rank that fails there had
    loaded) and again after it."""
    libs = loaded_libraries()
    found: dict[str, Any] = {"libraries": libs, "net_plugins": [p for p in libs if "nccl-net" in os.path.basename(p)],
                             "nccl_loaded": NO_NCCL_MAPPED}
    nccl_libs = [p for p in libs if os.path.basename(p).startswith("libnccl.so")]
    if nccl_libs:
        found["nccl_loaded_path"] = nccl_libs[0]
        found["nccl_loaded"] = nccl_version_of(nccl_libs[0])
    return found


def install_stack_dump(result_dir: str, rank: int) -> Any:
    """On SIGUSR1 write every thread's Python stack to rank{R}.stack: the driver asks for it before it kills a
    hung run. faulthandler dumps from the signal handler itself, so a rank blocked inside C++ still answers."""
    import faulthandler
    import signal

    out = open(os.path.join(result_dir, f"rank{rank}.stack"), "w")
    faulthandler.register(signal.SIGUSR1, file=out, all_threads=True)
    return out  # the caller keeps it open for the life of the process


def torch_timeout_s(spec: dict[str, Any]) -> float:
    """torch's own timeout (rendezvous, collectives): it must outlast the driver's deadline and its stack
    request, so a rank that waits for a stalled peer is still waiting when the driver asks for stacks (a
    timeout), never an init_error of its own. The driver's deadline starts only once every rank is started
    (a warm-pool spawn included), so a rank may start waiting up to that long before it: hence twice."""
    return 2 * float(spec.get("timeout_s", 120)) + float(spec.get("grace_s", 5.0))


def stall_here(stall: Any, rank: int, seq: int) -> None:
    """Fault injection (probe param ``stall``): this rank stops before collective ``seq`` (0: before
    init_process_group), as a wedged rank would."""
    if stall and int(stall["rank"]) == rank and int(stall["seq"]) == seq:
        while True:
            time.sleep(3600)


def run_checks(dist: Any, torch: Any, device: Any, world: int, rank: int, numel: int, collectives: list[str],
               enter: Any = None, launched: Any = None, async_op: bool = False) -> list[dict[str, Any]]:
    """Value-checked collectives; each check counts wrong elements like nccl-tests' #wrong.
    ``enter(name)`` is called before each one and ``launched()`` once it returned (the progress markers).
    ``async_op``: call each with async_op=True and wait on its handle, as NCCL behaves on a GPU (the call
    returns at once and the rank blocks later, outside torch.distributed)."""
    checks = []
    for name in collectives:
        if enter is not None:
            enter(name)
        t0 = time.perf_counter()
        works = []
        if name == "allreduce":
            buf = torch.full((numel,), float(rank + 1), device=device)
            works.append(dist.all_reduce(buf, async_op=async_op))
            expected = torch.full_like(buf, world * (world + 1) / 2)
            got = buf
        elif name == "allgather":
            mine = torch.full((numel,), float(rank + 1), device=device)
            outs = [torch.empty_like(mine) for _ in range(world)]
            works.append(dist.all_gather(outs, mine, async_op=async_op))
            got = outs
            expected = torch.cat([torch.full_like(mine, float(i + 1)) for i in range(world)])
        elif name == "alltoall":
            chunk = max(1, numel // world)
            send = torch.cat([torch.full((chunk,), float(rank * world + j), device=device) for j in range(world)])
            got = torch.empty_like(send)
            works.append(dist.all_to_all_single(got, send, async_op=async_op))
            expected = torch.cat([torch.full((chunk,), float(i * world + rank), device=device) for i in range(world)])
        else:
            raise ValueError(f"unknown collective {name!r}")
        if launched is not None:
            launched()
        for work in works:
            if work is not None:
                work.wait()
        if isinstance(got, list):
            got = torch.cat(got)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        wrong = int((got != expected).sum().item())
        checks.append({"collective": name, "numel": int(got.numel()), "wrong": wrong, "seconds": time.perf_counter() - t0})
    return checks


def cuda_init_env(env: Mapping[str, str]) -> dict[str, str]:
    """The part of a run's env that CUDA's context could depend on: what prepare_cuda runs under, and what the next
    run must equal for the context to be its own."""
    return {k: v for k, v in env.items() if k not in READ_AFTER_CUDA_INIT and not k.startswith(READ_AFTER_CUDA_INIT_PREFIXES)}


def cuda_device_of(env: Mapping[str, str]) -> Optional[int]:
    """The CUDA device this rank's env puts it on (as main() picks it), None for a run that touches no GPU or
    benches (a context made beside a timed run would share its GPU)."""
    identity = rank_identity(env)
    if env.get("ENVMATRIX_BACKEND") != "nccl" or identity is None:
        return None
    if json.loads(env.get("ENVMATRIX_PROBE", "{}")).get("bench"):
        return None
    return int(env.get("ENVMATRIX_DEVICE", identity[2]))


def prepare_cuda(env: Mapping[str, str]) -> bool:
    """In a pooled child forked ahead, while the run before it still runs: make CUDA's context on that run's device
    under that run's cuda_init_env (its NCCL_*, rendezvous and ENVMATRIX_* variables left out), so the next run
    with the same cuda_init_env and device starts with it (the pool server checks; any other run gets a fresh
    child). Only in the Default compute mode, where a second context on the device cannot take the GPU from the
    run beside it. False (the server discards this child) when it was not made."""
    device = cuda_device_of(env)
    if device is None:
        return False
    import ctypes

    os.environ.clear()
    os.environ.update(cuda_init_env(env))
    t0 = time.perf_counter()
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        handle, mode = ctypes.c_int(0), ctypes.c_int(-1)
        if (cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(handle), device)
                or cuda.cuDeviceGetAttribute(ctypes.byref(mode), CUDA_COMPUTE_MODE_ATTR, handle)):
            return False
        if mode.value != CUDA_COMPUTE_MODE_DEFAULT:
            return False
        import torch

        torch.cuda.set_device(device)
        torch.cuda.synchronize(device)  # the context exists now, not at the run's first call
    except Exception:  # noqa: BLE001 - a child that could not prepare is discarded, never used
        return False
    PREPARED.update(cuda_device=device, cuda_init_s=round(time.perf_counter() - t0, 4))
    return True


def main() -> int:
    spec = json.loads(os.environ.get("ENVMATRIX_PROBE", "{}"))
    identity = rank_identity(os.environ)
    if identity is None:
        print(f"envmatrix rank: no rank variables ({rank_var_names()}) set", file=sys.stderr)
        return 2
    rank, world, local_rank = identity
    result_dir = os.environ.get(RESULT_DIR_VAR, ".")
    stack_file = install_stack_dump(result_dir, rank)  # noqa: F841 - must stay open
    reporter = Reporter(result_dir, rank)
    reporter.data.update(env=echoed_env(os.environ), world=world, local_rank=local_rank)
    # Where and with what this rank runs is read before torch's import and init_process_group (none of it needs a
    # process group), so a rank that fails or hangs there still names its host, GPU and versions.
    reporter.data.update(host_identity(os.environ))
    versions: dict[str, Any] = {"python": sys.version.split()[0], "start": START_MODE}
    reporter.data["versions"] = versions
    if PREPARED:
        reporter.data["pool_prepared"] = dict(PREPARED)
    if spec.get("nccl_dump_topology") and os.environ.get("ENVMATRIX_BACKEND") == "nccl":
        # Set after the env echo, so the delivery check compares only what the launcher delivered.
        os.environ.setdefault("NCCL_TOPO_DUMP_FILE", os.path.join(result_dir, "nccl_topo.xml"))
        os.environ.setdefault("NCCL_GRAPH_DUMP_FILE", os.path.join(result_dir, "nccl_graph.xml"))
    started = time.perf_counter()
    try:
        reporter.phase("import")
        import datetime

        import torch
        import torch.distributed as dist

        backend = os.environ.get("ENVMATRIX_BACKEND", "gloo")
        versions.update(torch=torch.__version__, nccl_torch_built=nccl_torch_built(dist, torch), **loaded_nccl())
        reporter.data["timings"]["import_s"] = time.perf_counter() - started

        reporter.phase("init")
        stall_here(spec.get("stall"), rank, 0)  # seq 0: a rank that never joins the rendezvous
        t0 = time.perf_counter()
        timeout = datetime.timedelta(seconds=torch_timeout_s(spec))
        # right before the rendezvous: rank 0 binds its store only there (after its CUDA context on NCCL)
        store_wait = wait_for_rank0_store if START_MODE == "pooled" and rank != 0 else (lambda env: None)
        if backend == "nccl":
            device = torch.device("cuda", int(os.environ.get("ENVMATRIX_DEVICE", local_rank)))
            torch.cuda.set_device(device)
            reporter.data["device"] = torch.cuda.get_device_name(device)
        else:
            device = torch.device("cpu")
            reporter.data["device"] = "cpu"
        reporter.data["gpu_uuid"], reporter.data["pci_bus_id"] = gpu_identity(torch, device)
        reporter.flush()  # the GPU is named before the rendezvous, which may fail or hang
        store_wait(os.environ)
        if backend == "nccl":
            dist.init_process_group("nccl", rank=rank, world_size=world, timeout=timeout, device_id=device)
            # device_id makes NCCL create its communicator now; a barrier proves it works.
            dist.barrier()
        else:
            dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)
        reporter.data["timings"]["init_s"] = time.perf_counter() - t0
        versions.update(loaded_nccl())  # NET plugins load at communicator init
    except Exception as exc:  # noqa: BLE001 - every failure is data
        return record_failure(reporter, "init_error", exc)

    try:
        reporter.phase("collectives")
        t0 = time.perf_counter()
        stall = spec.get("stall")

        def enter(name: str) -> None:
            stall_here(stall, rank, reporter.enter(name))

        checks = run_checks(dist, torch, device, world, rank, int(spec.get("numel", 4096)),
                            list(spec.get("collectives", ["allreduce"])), enter, reporter.launched,
                            bool(spec.get("async_op")))
        reporter.data["checks"] = checks
        reporter.data["timings"]["collectives_s"] = time.perf_counter() - t0
    except Exception as exc:  # noqa: BLE001
        return record_failure(reporter, "collective_error", exc)

    bench = spec.get("bench")
    if bench:
        try:
            from envmatrix.rank.collective_timer import BenchContext, run_bench

            reporter.phase("bench")
            t0 = time.perf_counter()
            ctx = BenchContext(dist, torch, device, rank, world, int(os.environ.get("LOCAL_WORLD_SIZE", world)), bench["dtype"])
            ctx.enter = enter
            ctx.peer_plans = bench.get("peer_plan") or {}  # who talks to whom: the driver's plan (planning/)
            ctx.pair_rounds = bench.get("pair_rounds")
            reporter.data["bench"] = run_bench(ctx, bench["collectives"], bench["sizes"], bench["iters"], bench["warmup"], bench["check"], bench.get("timing", "host"),
                                                 bench.get("max_bytes") or 0)
            reporter.data["timings"]["bench_s"] = time.perf_counter() - t0
        except Exception as exc:  # noqa: BLE001
            return record_failure(reporter, "collective_error", exc)
        checks = checks + [
            {"collective": f"{r['collective']}@{r['size_bytes']}", "numel": r["count"], "wrong": r["wrong"] or 0}
            for r in reporter.data["bench"]
        ]

    wrong = [c for c in checks if c["wrong"]]
    if wrong:
        reporter.data["error"] = "; ".join(f"{c['collective']}: {c['wrong']} of {c['numel']} elements wrong" for c in wrong)
        reporter.phase("done", outcome="wrong_result")
        _finish(dist)
        return WRONG_RESULT_EXIT
    if spec.get("teardown", "destroy") == "destroy":
        t0 = time.perf_counter()
        _finish(dist)
        # a fixed per-run cost of every sweep config (issue 14: ~0.65 s from verdict to reaped on H200)
        reporter.data["timings"]["teardown_s"] = time.perf_counter() - t0
    # teardown=exit: the caller ends the process (os._exit) with the group alive; the stored probe spec says so
    reporter.data["timings"]["total_s"] = time.perf_counter() - started
    reporter.phase("done", outcome="pass")
    return 0


def record_failure(reporter: Reporter, outcome: str, exc: BaseException) -> int:
    reporter.data["failed_at"] = time.time()
    reporter.data["error"] = clipped("".join(traceback.format_exception_only(type(exc), exc)).strip())
    reporter.data["traceback"] = traceback.format_exc()[-6000:]
    reporter.phase(reporter.data["phase"], outcome=outcome)
    print(reporter.data["traceback"], file=sys.stderr, flush=True)
    return 1


def _finish(dist: Any) -> None:
    try:
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - teardown problems must not mask the result
        pass


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: NCCL/gloo destructors can hang after a failure.
    os._exit(code)
