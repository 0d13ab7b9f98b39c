"""Warm pool with real processes: forked ranks get the run's env, report 'pooled',
fall back to cold for loader-changing setups, and die like cold ranks do."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import time

import pytest

from conftest import assert_no_processes, processes_with_marker, write_conf
from envmatrix.execution.pool import WarmPool, cold_reason
from envmatrix.boundary import ProcessSpec
from envmatrix.engine.launch import free_port

pytestmark = pytest.mark.slow

ARGV = (sys.executable, "-m", "envmatrix.rank.main")


def _rank_spec(tmp_path, rank, world, port, marker, **extra):
    env = {
        **os.environ, "ENVMATRIX_TEST_MARKER": marker, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        "RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank), "ENVMATRIX_BACKEND": "gloo",
        "ENVMATRIX_RESULT_DIR": str(tmp_path), "GLOO_SOCKET_IFNAME": "lo",
        "ENVMATRIX_PROBE": json.dumps({"timeout_s": 60, "collectives": ["allreduce"]}), **extra,
    }
    return ProcessSpec(ARGV, env, str(tmp_path / f"rank{rank}.log"), f"rank{rank}", str(tmp_path))


def _report(tmp_path, rank):
    return json.loads((tmp_path / f"rank{rank}.json").read_text())


def test_cold_reason_names_loader_vars_and_other_commands():
    base = {"LD_LIBRARY_PATH": "/a", "PATH": "/bin"}
    spec = ProcessSpec(ARGV, {"LD_LIBRARY_PATH": "/a", "NCCL_ALGO": "Ring"}, "/dev/null")
    assert cold_reason(spec, base, sys.executable) is None
    for var, value in [("LD_LIBRARY_PATH", "/b"), ("LD_PRELOAD", "x.so"), ("NCCL_NET_PLUGIN", "ofi"), ("PYTHONPATH", "/p")]:
        changed = ProcessSpec(ARGV, {**spec.env, var: value}, "/dev/null")
        assert var in cold_reason(changed, base, sys.executable)
    other = ProcessSpec(("/usr/bin/python3.9", "-m", "envmatrix.rank.main"), spec.env, "/dev/null")
    assert "is not" in cold_reason(other, base, sys.executable)
    assert "is not" in cold_reason(ProcessSpec(("all_reduce_perf",), spec.env, "/dev/null"), base, sys.executable)


def test_pooled_children_take_the_runs_env_and_servers_are_reused(tmp_path):
    marker = "pool-env-" + tmp_path.name
    with WarmPool({**os.environ}) as pool:
        pids = []
        for value in ("first", "second"):
            port = free_port()
            specs = [_rank_spec(tmp_path, r, 2, port, marker, NCCL_ALGO=value, TORCH_DISTRIBUTED_DEBUG="DETAIL") for r in range(2)]
            outs = pool.run_group(specs, timeout_s=120)
            assert [o.exit_code for o in outs] == [0, 0], [(tmp_path / f"rank{r}.log").read_text() for r in range(2)]
            for r in range(2):
                rep = _report(tmp_path, r)
                assert rep["outcome"] == "pass" and rep["versions"]["start"] == "pooled"
                assert rep["env"]["NCCL_ALGO"] == value  # env echo from inside the child: delivered
                pids.append(rep["pid"])
        assert pool.started == {"pooled": 4, "cold": 0}
        assert len(pool._all) == 2  # the second run reused both warm servers
        assert len(set(pids)) == 4  # a fresh child per run
    assert_no_processes(marker)


@pytest.mark.parametrize("teardown", ["destroy", "exit"])
def test_teardown_exit_ends_pooled_ranks_without_destroying_the_group(tmp_path, teardown):
    marker = f"pool-teardown-{teardown}-" + tmp_path.name
    probe = json.dumps({"timeout_s": 60, "collectives": ["allreduce", "allgather"], "teardown": teardown})
    with WarmPool({**os.environ}) as pool:
        port = free_port()
        specs = [_rank_spec(tmp_path, r, 2, port, marker, ENVMATRIX_PROBE=probe) for r in range(2)]
        outs = pool.run_group(specs, timeout_s=120)
        assert [o.exit_code for o in outs] == [0, 0], [(tmp_path / f"rank{r}.log").read_text() for r in range(2)]
        for r in range(2):
            rep = _report(tmp_path, r)
            assert rep["outcome"] == "pass" and rep["versions"]["start"] == "pooled"
            assert ("teardown_s" in rep["timings"]) == (teardown == "destroy"), rep["timings"]
    assert_no_processes(marker)


def test_loader_change_starts_cold_and_says_so(tmp_path):
    marker = "pool-cold-" + tmp_path.name
    with WarmPool({**os.environ}) as pool:
        port = free_port()
        specs = [_rank_spec(tmp_path, r, 2, port, marker, LD_LIBRARY_PATH="/nonexistent/envmatrix") for r in range(2)]
        outs = pool.run_group(specs, timeout_s=120)
        assert [o.exit_code for o in outs] == [0, 0]
        assert [_report(tmp_path, r)["versions"]["start"] for r in range(2)] == ["cold", "cold"]
        assert pool.started == {"pooled": 0, "cold": 2} and not pool._all
    assert_no_processes(marker)


def test_hang_in_pooled_child_is_killed_at_timeout_and_server_survives(tmp_path):
    marker = "pool-hang-" + tmp_path.name
    with WarmPool({**os.environ}) as pool:
        # rank 1 never comes: rank 0 waits in init until the run's deadline.
        lonely = _rank_spec(tmp_path, 0, 2, free_port(), marker)
        t0 = time.monotonic()
        (out,) = pool.run_group([lonely], timeout_s=4)
        assert out.killed_by == "timeout" and out.signal == "SIGKILL"
        assert time.monotonic() - t0 < 4 + 30  # loaded 2-core box: generous, but bounded
        with pytest.raises(ProcessLookupError):
            os.kill(out.pid, 0)
        # the same warm server serves the next run
        (ok,) = pool.run_group([_rank_spec(tmp_path, 0, 1, free_port(), marker)], timeout_s=120)
        assert ok.exit_code == 0 and len(pool._all) == 1
        assert len(processes_with_marker(marker)) == 1  # only the idle server
    assert_no_processes(marker)


def test_crash_of_a_pooled_child_is_a_signal_and_peer_is_killed(tmp_path):
    marker = "pool-crash-" + tmp_path.name
    with WarmPool({**os.environ}) as pool:
        port = free_port()
        specs = [_rank_spec(tmp_path, r, 3, port, marker) for r in range(2)]  # world 3: both hang in init

        import threading

        def crash_rank0():
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    os.kill(_report(tmp_path, 0)["pid"], signal.SIGSEGV)
                    return
                except (OSError, ValueError, KeyError):
                    time.sleep(0.05)

        t = threading.Thread(target=crash_rank0)
        t.start()
        outs = pool.run_group(specs, timeout_s=90, grace_s=1)
        t.join()
        assert outs[0].signal == "SIGSEGV" and outs[0].killed_by is None
        assert outs[1].killed_by == "peer_failure"
    assert_no_processes(marker)


GLOO_CONF = """
name: pool_vs_cold
backend: gloo
grids: [1x2, 2x1]
setups:
  baseline: {}
  debug_detail: {TORCH_DISTRIBUTED_DEBUG: DETAIL}
  missing_if: {GLOO_SOCKET_IFNAME: envmx_missing0}
  ld_path: {LD_LIBRARY_PATH: /nonexistent/envmatrix}
probe:
  timeout_s: 60
  collectives: [allreduce, allgather, alltoall]
"""


def _outcomes(out):
    data = json.loads((out / "results.json").read_text())
    return {
        (r["setup"]["name"], r["grid"]): (r["outcome"], (r["root_cause"] or {}).get("line")) for r in data["results"]
    }, {(r["setup"]["name"], r["grid"]): [k["versions"].get("start") for k in r["ranks"]] for r in data["results"]}


@pytest.mark.parametrize("conf_text", [None, GLOO_CONF], ids=["conf_default", "failures_and_loader"])
def test_results_identical_with_and_without_pool(cli, tmp_path, conf_text):
    # conf/default.yaml varies NCCL variables only: on gloo that is refused unless asked for (pool equivalence is the point here)
    args = ["backend=gloo", "grids=[1x2,2x1]", "--allow-ignored-vars"] if conf_text is None else [f"conf={write_conf(tmp_path / 'c.yaml', conf_text)}"]
    runs = {}
    for mode in ("pool", "no_pool"):
        out = tmp_path / mode
        extra = ["--no-pool"] if mode == "no_pool" else []
        done = cli.run("sweep", *args, "--out", str(out), "--allow-unknown-vars", *extra, timeout=400)
        assert done.returncode == (0 if conf_text is None else 1), done.stderr + done.stdout  # 1: a cell failed
        runs[mode] = _outcomes(out)
    assert runs["pool"][0] == runs["no_pool"][0]
    assert any(o != "pass" for o, _ in runs["pool"][0].values()) == (conf_text is not None)
    starts = runs["pool"][1]
    for (setup, _grid), ranks in starts.items():
        if setup == "missing_if":
            continue  # fails in init, versions still say how it started
        assert set(ranks) == ({"cold"} if setup == "ld_path" else {"pooled"}), (setup, ranks)
    assert all(set(r) <= {"cold"} for r in runs["no_pool"][1].values())
    assert_no_processes(cli.marker)


def test_sigkill_of_driver_leaves_no_pool_server_or_child(cli, tmp_path):
    conf = write_conf(tmp_path / "k.yaml", "backend: gloo\ngrids: [1x2]\nsetups: {a: {}, b: {TORCH_DISTRIBUTED_DEBUG: INFO}, c: {TORCH_DISTRIBUTED_DEBUG: DETAIL}}\nprobe: {timeout_s: 60}\n")
    out = tmp_path / "o"
    driver = cli.popen("sweep", f"conf={conf}", "--out", str(out))
    deadline = time.time() + 120
    while time.time() < deadline:
        db = out / "results.sqlite"
        if db.exists():
            try:
                with sqlite3.connect(db) as c:
                    if c.execute("SELECT COUNT(*) FROM results").fetchone()[0] >= 1:
                        break
            except sqlite3.OperationalError:
                pass
        time.sleep(0.1)
    assert len(processes_with_marker(cli.marker)) >= 2  # driver + warm servers (+ children)
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    assert_no_processes(cli.marker, wait_s=15)


def test_ctrl_c_stops_pool_and_children(cli, tmp_path):
    # rank 1 stalls, so the first run is still in flight when the signal lands: a sweep that had
    # already finished would be interrupted in interpreter shutdown, which proves nothing (and exits -2)
    conf = write_conf(tmp_path / "i.yaml", "backend: gloo\ngrids: [1x2]\nsetups: {a: {}, b: {TORCH_DISTRIBUTED_DEBUG: INFO}}\n"
                                           "probe: {timeout_s: 120, stall: {rank: 1, seq: 1}}\n")
    driver = cli.popen("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    deadline = time.time() + 120
    # the driver, two pool servers and the two ranks they forked
    while time.time() < deadline and len(processes_with_marker(cli.marker)) < 5 and driver.poll() is None:
        time.sleep(0.1)
    assert driver.poll() is None, driver.stdout.read()
    driver.send_signal(signal.SIGINT)
    assert driver.wait(timeout=60) == 130, driver.stdout.read()
    assert "interrupted; finished runs are in the store" in driver.stdout.read()
    assert_no_processes(cli.marker, wait_s=15)


def test_servers_outlive_the_worker_threads_of_packed_runs(tmp_path):
    # PDEATHSIG is per thread: servers started from a packed run's worker thread used to die with it.
    import threading

    marker = "pool-threads-" + tmp_path.name
    with WarmPool({**os.environ}) as pool:
        for batch in range(2):
            threads = []
            for lane in range(2):
                d = tmp_path / f"{batch}{lane}"
                d.mkdir()
                threads.append(threading.Thread(target=pool.run_group, args=([_rank_spec(d, 0, 1, free_port(), marker)],), kwargs={"timeout_s": 90}))
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert pool.started == {"pooled": 4, "cold": 0} and len(pool._all) == 2
    assert_no_processes(marker)


def test_prestarted_servers_serve_the_first_run_and_unfit_ones_are_never_chosen(tmp_path):
    marker = "pool-prestart-" + tmp_path.name
    env = {**os.environ, "ENVMATRIX_TEST_MARKER": marker}
    # one server started under another net plugin (a loader variable), two under the ranks' own env
    with WarmPool.prestart({**env, "NCCL_NET_PLUGIN": "envmx_other"}, 1) as pool:
        pool.rebase(env)
        pool.warm(2)
        unfit = [s for s in pool._all if s.loader != pool._all[-1].loader]
        assert len(pool._all) == 3 and len(unfit) == 1  # started at once, before any run asked
        port = free_port()
        outs = pool.run_group([_rank_spec(tmp_path, r, 2, port, marker) for r in range(2)], timeout_s=120)
        assert [o.exit_code for o in outs] == [0, 0], [(tmp_path / f"rank{r}.log").read_text() for r in range(2)]
        assert [_report(tmp_path, r)["versions"]["start"] for r in range(2)] == ["pooled", "pooled"]
        assert len(pool._all) == 3  # the prestarted fit servers ran it: none spawned on demand
        assert unfit[0] in pool._idle and unfit[0].alive  # ... and the unfit one never forked a rank
        pool.warm(2)
        assert len(pool._all) == 3  # both fit servers are idle again: nothing to top up
    assert_no_processes(marker)


def test_likely_ranks_counts_visible_gpu_nodes_else_two(monkeypatch):
    import glob

    from envmatrix.execution.pool import likely_ranks

    monkeypatch.setattr(glob, "glob", lambda pattern: [f"/dev/nvidia{i}" for i in range(4)])
    assert likely_ranks({}) == 4 and likely_ranks({"CUDA_VISIBLE_DEVICES": "2,3"}) == 2
    monkeypatch.setattr(glob, "glob", lambda pattern: [])
    assert likely_ranks({}) == 2


def test_bad_input_kills_the_prestarted_servers_and_writes_nothing(cli, tmp_path):
    out = tmp_path / "never"
    done = cli.run("sweep", "backend=gloo", "grids=[1x2]", "probe.timeout_s=-5", "--out", str(out), timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "error" in done.stderr
    assert not out.exists()
    assert_no_processes(cli.marker, wait_s=15)
