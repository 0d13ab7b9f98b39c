"""Warm pool with real processes: forked ranks get the run's env, report 'pooled', run from servers started under
their own loader values (cold only where LD_PRELOAD/LD_AUDIT change), and die like cold ranks do."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import time

import pytest

from conftest import assert_no_processes, processes_with_marker, workers_with_marker, write_conf
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


def test_cold_reason_names_start_code_vars_and_other_commands():
    base = {"LD_LIBRARY_PATH": "/a", "PATH": "/bin"}
    spec = ProcessSpec(ARGV, {"LD_LIBRARY_PATH": "/a", "NCCL_ALGO": "Ring"}, "/dev/null")
    assert cold_reason(spec, base, sys.executable) is None
    for var, value in [("LD_PRELOAD", "x.so"), ("LD_AUDIT", "a.so")]:
        changed = ProcessSpec(ARGV, {**spec.env, var: value}, "/dev/null")
        assert var in cold_reason(changed, base, sys.executable)
    for var, value in [("LD_LIBRARY_PATH", "/b"), ("NCCL_NET_PLUGIN", "ofi"), ("PYTHONPATH", "/p")]:
        # a server of their own, started under these values, serves them
        assert cold_reason(ProcessSpec(ARGV, {**spec.env, var: value}, "/dev/null"), base, sys.executable) is None
    other = ProcessSpec(("/usr/bin/python3.9", "-m", "envmatrix.rank.main"), spec.env, "/dev/null")
    assert "is not" in cold_reason(other, base, sys.executable)
    assert "is not" in cold_reason(ProcessSpec(("all_reduce_perf",), spec.env, "/dev/null"), base, sys.executable)


def test_pooled_children_take_the_runs_env_and_servers_are_reused(tmp_path):
    marker = "pool-env-" + tmp_path.name
    with WarmPool({**os.environ, "ENVMATRIX_TEST_MARKER": marker}) as pool:
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


def test_a_cuda_context_made_ahead_fits_only_a_run_that_differs_in_variables_read_after_it():
    # the decision ENVMATRIX_POOL_CUDA_PREINIT=1 rests on (pool_server._Spare.fits); the context itself needs a GPU
    from envmatrix.rank.main import cuda_device_of, cuda_init_env

    run = {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0", "ENVMATRIX_BACKEND": "nccl", "RANK": "1", "WORLD_SIZE": "2",
           "LOCAL_RANK": "1", "MASTER_PORT": "2950", "NCCL_ALGO": "Ring", "ENVMATRIX_PROBE": json.dumps({"timeout_s": 9})}
    assert cuda_device_of(run) == 1
    assert cuda_device_of({**run, "ENVMATRIX_DEVICE": "0"}) == 0  # emulated hosts sharing GPU 0
    assert cuda_device_of({**run, "ENVMATRIX_BACKEND": "gloo"}) is None
    assert cuda_device_of({**run, "ENVMATRIX_PROBE": json.dumps({"bench": {"sizes": [8]}})}) is None  # timed runs: none
    next_run = {**run, "NCCL_ALGO": "Tree", "NCCL_PROTO": "LL", "MASTER_PORT": "2951", "ENVMATRIX_RESULT_DIR": "/r"}
    assert cuda_init_env(next_run) == cuda_init_env(run) == {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0"}
    for var, value in [("CUDA_VISIBLE_DEVICES", "1"), ("CUDA_DEVICE_MAX_CONNECTIONS", "1"),
                       ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"), ("TORCH_NCCL_BLOCKING_WAIT", "1")]:
        assert cuda_init_env({**next_run, var: value}) != cuda_init_env(run), var  # a fresh child for these


def test_cuda_contexts_are_made_ahead_by_default_only_where_a_driver_is_present(monkeypatch):
    from envmatrix.execution import pool_server

    for present in (True, False):
        monkeypatch.setattr(pool_server.os.path, "exists", lambda path, present=present: present and path == "/dev/nvidiactl")
        assert pool_server.cuda_preinit_enabled({}) is present
        assert pool_server.cuda_preinit_enabled({"ENVMATRIX_POOL_CUDA_PREINIT": "0"}) is False
        assert pool_server.cuda_preinit_enabled({"ENVMATRIX_POOL_CUDA_PREINIT": "1"}) is True


def test_a_child_that_could_not_make_its_cuda_context_ahead_is_never_used(tmp_path):
    # ENVMATRIX_POOL_CUDA_PREINIT=1 on a box without CUDA: each NCCL run forks the next child to make a context ahead,
    # it cannot (prepare_cuda says no), so the next run gets a fresh child; every run still runs and reports
    marker = "pool-preinit-" + tmp_path.name
    with WarmPool({**os.environ, "ENVMATRIX_TEST_MARKER": marker, "ENVMATRIX_POOL_CUDA_PREINIT": "1"}) as pool:
        for attempt in range(3):
            run_dir = tmp_path / str(attempt)
            run_dir.mkdir()
            spec = _rank_spec(run_dir, 0, 1, free_port(), marker, ENVMATRIX_BACKEND="nccl", NCCL_ALGO=f"a{attempt}")
            (out,) = pool.run_group([spec], timeout_s=120)
            report = _report(run_dir, 0)
            assert out.exit_code == 1 and report["outcome"] == "init_error", (run_dir / "rank0.log").read_text()
            assert "pool_prepared" not in report  # (a CPU torch fails at NCCL's version, before it says how it started)
            assert report["env"]["NCCL_ALGO"] == f"a{attempt}"
        assert len(pool._all) == 1 and pool.started == {"pooled": 3, "cold": 0}
    assert_no_processes(marker)


def test_no_env_leaks_from_one_config_to_the_next_through_the_child_forked_ahead(tmp_path):
    # one server, one rank: config B runs in the child the server forked while A ran; B must see only its own env
    marker = "pool-leak-" + tmp_path.name
    with WarmPool({**os.environ, "ENVMATRIX_TEST_MARKER": marker}) as pool:
        for extra in ({"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL", "TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, {"NCCL_PROTO": "Simple"}):
            outs = pool.run_group([_rank_spec(tmp_path, 0, 1, free_port(), marker, **extra)], timeout_s=120)
            assert outs[0].exit_code == 0, (tmp_path / "rank0.log").read_text()
            env = _report(tmp_path, 0)["env"]
            assert {k: env.get(k) for k in ("NCCL_ALGO", "NCCL_PROTO", "TORCH_DISTRIBUTED_DEBUG")} == {
                k: extra.get(k) for k in ("NCCL_ALGO", "NCCL_PROTO", "TORCH_DISTRIBUTED_DEBUG")}
        assert len(pool._all) == 1 and pool.started == {"pooled": 2, "cold": 0}
    assert_no_processes(marker)


@pytest.mark.parametrize("teardown", ["destroy", "exit"])
def test_teardown_exit_ends_pooled_ranks_without_destroying_the_group(tmp_path, teardown):
    marker = f"pool-teardown-{teardown}-" + tmp_path.name
    probe = json.dumps({"timeout_s": 60, "collectives": ["allreduce", "allgather"], "teardown": teardown})
    with WarmPool({**os.environ, "ENVMATRIX_TEST_MARKER": marker}) as pool:
        port = free_port()
        specs = [_rank_spec(tmp_path, r, 2, port, marker, ENVMATRIX_PROBE=probe) for r in range(2)]
        outs = pool.run_group(specs, timeout_s=120)
        assert [o.exit_code for o in outs] == [0, 0], [(tmp_path / f"rank{r}.log").read_text() for r in range(2)]
        for r in range(2):
            rep = _report(tmp_path, r)
            assert rep["outcome"] == "pass" and rep["versions"]["start"] == "pooled"
            assert ("teardown_s" in rep["timings"]) == (teardown == "destroy"), rep["timings"]
    assert_no_processes(marker)


def _server_environ(pid):
    with open(f"/proc/{pid}/environ", "rb") as fh:
        return dict(item.split(b"=", 1) for item in fh.read().split(b"\0") if b"=" in item)


def test_a_loader_change_runs_pooled_from_servers_started_under_it_and_preload_starts_cold(tmp_path):
    # seed 003's setups all prepend LD_LIBRARY_PATH: they used to start every rank cold (a cold 2x4 run on one GPU is
    # 8 torch imports), which is what made `sweep conf=aws_ofi.yaml --emulate-hosts` outlast 120 s on the H100
    marker = "pool-loader-" + tmp_path.name
    ld_path = "/nonexistent/envmatrix:" + os.environ.get("LD_LIBRARY_PATH", "")
    with WarmPool({**os.environ, "ENVMATRIX_TEST_MARKER": marker}) as pool:
        pool.warm(2)  # base servers: never chosen for the changed value
        for attempt in range(2):
            port = free_port()
            specs = [_rank_spec(tmp_path, r, 2, port, marker, LD_LIBRARY_PATH=ld_path, NCCL_ALGO=f"run{attempt}")
                     for r in range(2)]
            outs = pool.run_group(specs, timeout_s=120)
            assert [o.exit_code for o in outs] == [0, 0], [(tmp_path / f"rank{r}.log").read_text() for r in range(2)]
            assert [_report(tmp_path, r)["versions"]["start"] for r in range(2)] == ["pooled", "pooled"]
        assert pool.started == {"pooled": 4, "cold": 0}
        assert len(pool._all) == 4  # 2 base servers + 2 under the changed path, reused by the second run
        keyed = [s for s in pool._all if s.loader != pool._all[0].loader]
        for server in keyed:
            env = _server_environ(server.proc.pid)
            assert env[b"LD_LIBRARY_PATH"] == ld_path.encode()  # the loader resolved under the run's value
            assert b"NCCL_ALGO" not in env and b"RANK" not in env  # nothing else of a setup reaches a server
        # LD_PRELOAD runs code in the server's own start (a fork keeps its state, not its threads): cold
        preload = [_rank_spec(tmp_path, 0, 1, free_port(), marker, LD_PRELOAD="")]
        (out,) = pool.run_group(preload, timeout_s=120)
        assert out.exit_code == 0 and _report(tmp_path, 0)["versions"]["start"] == "cold"
        assert pool.started == {"pooled": 4, "cold": 1} and len(pool._all) == 4
    assert_no_processes(marker)


def test_hang_in_pooled_child_is_killed_at_timeout_and_server_survives(tmp_path):
    marker = "pool-hang-" + tmp_path.name
    with WarmPool({**os.environ, "ENVMATRIX_TEST_MARKER": marker}) as pool:
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
        server = pool._all[0].proc.pid
        deadline = time.monotonic() + 10  # the child for the next run is forked once this run's result was said
        while len(left := processes_with_marker(marker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server in left and len(left) == 2  # the idle server and the child it forked ahead for the next run
        assert all(pid == server or _parent(pid) == server for pid in left)
    assert_no_processes(marker)


def _parent(pid):
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[1])


def test_crash_of_a_pooled_child_is_a_signal_and_peer_is_killed(tmp_path):
    marker = "pool-crash-" + tmp_path.name
    with WarmPool({**os.environ, "ENVMATRIX_TEST_MARKER": marker}) as pool:
        port = free_port()
        # world 3: rank 0 waits in init for rank 2; rank 1 stalls before init, so rank 0's crash cannot end it by a
        # broken rendezvous (a race the faster pooled start used to lose): only the peer-failure kill can
        probe = json.dumps({"timeout_s": 60, "collectives": ["allreduce"], "stall": {"rank": 1, "seq": 0}})
        specs = [_rank_spec(tmp_path, r, 3, port, marker, ENVMATRIX_PROBE=probe) for r in range(2)]

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
  preload: {LD_PRELOAD: ""}
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
        assert set(ranks) == ({"cold"} if setup == "preload" else {"pooled"}), (setup, ranks)
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


def _stalled_rank_reported(run_dir):
    for path in run_dir.glob("logs/**/rank1.json"):
        try:
            if json.loads(path.read_text()).get("progress"):
                return True
        except ValueError:
            pass
    return False


def test_ctrl_c_stops_pool_and_children(cli, tmp_path):
    # rank 1 stalls, so the first run is still in flight when the signal lands: a sweep that had
    # already finished would be interrupted in interpreter shutdown, which proves nothing (and exits -2)
    conf = write_conf(tmp_path / "i.yaml", "backend: gloo\ngrids: [1x2]\nsetups: {a: {}, b: {TORCH_DISTRIBUTED_DEBUG: INFO}}\n"
                                           "probe: {timeout_s: 120, stall: {rank: 1, seq: 1}}\n")
    driver = cli.popen("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    deadline = time.time() + 120
    # the driver, two pool servers, the two ranks they forked and the next run's children they forked ahead, once
    # rank 1 has reported that it stalled in its first collective
    while time.time() < deadline and driver.poll() is None and not (
            len(workers_with_marker(cli.marker)) >= 5 and _stalled_rank_reported(tmp_path / "o")):
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
    with WarmPool({**os.environ, "ENVMATRIX_TEST_MARKER": marker}) as pool:
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


def test_a_pooled_rank_waits_for_rank0s_store_by_the_socket_table_without_connecting():
    # pooled ranks start within a millisecond of each other; torch's client retries a refused connect only after
    # ~0.5-1.5 s (1 in 6 pooled 2x1 gloo runs paid it); a probing connect could connect to itself and take the port
    import socket
    import threading

    from envmatrix.rank.store_wait import port_listening, wait_for_rank0_store

    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        server = socket.socket(family)
        server.bind((host, 0))
        port = server.getsockname()[1]
        assert not port_listening(port)  # bound is not listening
        threading.Timer(0.2, server.listen).start()
        t0 = time.monotonic()
        wait_for_rank0_store({"MASTER_PORT": str(port)}, limit_s=20)
        waited = time.monotonic() - t0
        assert port_listening(port) and 0.15 < waited < 10, waited
        with socket.create_connection((host, port)) as client:
            assert not port_listening(client.getsockname()[1])  # a connected socket is not a listener
        server.close()
    t0 = time.monotonic()
    wait_for_rank0_store({"MASTER_PORT": str(port)}, limit_s=0.3)  # nobody listens: torch's rendezvous goes on
    assert 0.25 < time.monotonic() - t0 < 10
