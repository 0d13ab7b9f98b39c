"""The bench engine on a real one-rank gloo group; a corrupted collective must show #wrong."""

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import torch, torch.distributed as dist
    from envmatrix.rank.collective_timer import BenchContext, run_bench, BUILDERS
    dist.init_process_group("gloo", rank=0, world_size=1, init_method="tcp://127.0.0.1:%d" % int(sys.argv[1]))
    ctx = BenchContext(dist, torch, torch.device("cpu"), 0, 1, 1, "float32")
    markers = []
    ctx.enter = markers.append
    good = run_bench(ctx, list(BUILDERS), [64, 4096], iters=2, warmup=1)
    ctx.enter = None
    blocking = run_bench(ctx, ["allreduce"], [64], iters=3, warmup=0, timing="blocking")
    try:
        run_bench(ctx, ["allreduce"], [64], iters=1, warmup=0, timing="graph")
        graph_error = None
    except Exception as exc:
        graph_error = str(exc)
    real = dist.all_reduce
    def corrupt(t, *a, **k):
        out = real(t, *a, **k)
        t[0] += 1
        return out
    dist.all_reduce = corrupt
    bad = run_bench(ctx, ["allreduce"], [64], iters=1, warmup=0)
    print(json.dumps({"markers": markers, "good": good, "bad": bad, "blocking": blocking, "graph_error": graph_error}), flush=True)
    # Without this, gloo's worker threads and the TCPStore server are torn down by static destructors
    # at interpreter exit; on a loaded machine a still-joinable std::thread there aborts the process
    # ("terminate called without an active exception"). envmatrix/rank/main.py does the same.
    dist.destroy_process_group()
    """
)


@pytest.mark.slow  # a torch rank through every collective: 2 s alone, 26 s beside 4 workers
def test_engine_rows_and_wrong_detection(tmp_path):
    import json
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(port)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout.strip().splitlines()[-1])
    good = data["good"]
    # point-to-point patterns need a peer: skipped on one rank
    assert {r["collective"] for r in good} == {"allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast", "reduce", "ps_central", "ps_sharded"}
    assert all(r["wrong"] == 0 for r in good)
    assert all(r["time_min_us"] <= r["time_median_us"] <= r["time_max_us"] for r in good)
    assert {r["size_bytes"] for r in good if r["collective"] == "allreduce"} == {64, 4096}
    assert data["bad"][0]["wrong"] == 1
    timing = {r["collective"]: r["timing"] for r in good}
    assert timing["allreduce"] == "host" and timing["ps_sharded"] == "blocking"
    # torch's own calls: allreduce, broadcast, reduce and ps_central overwrite their input (nccl-tests' in-place)
    assert {r["collective"] for r in good if r["in_place"]} == {"allreduce", "broadcast", "reduce", "ps_central"}
    # host timing: one window per size, so min = median = max = the window mean
    ar = [r for r in good if r["collective"] == "allreduce"]
    assert all(r["time_min_us"] == r["time_us"] == r["time_max_us"] > 0 for r in ar)
    # nccl-tests' order: every size warmed up (doubling from -b) before the collective's first window
    ar_markers = [m for m in data["markers"] if m.startswith("allreduce@")]
    assert ar_markers == [f"allreduce@{64 << k} warm-up" for k in range(7)] + ["allreduce@64", "allreduce@4096"]
    (blk,) = data["blocking"]
    assert blk["timing"] == "blocking" and blk["time_min_us"] <= blk["time_us"] <= blk["time_max_us"]
    assert "needs CUDA" in data["graph_error"] and "allowed here: host, blocking" in data["graph_error"]
