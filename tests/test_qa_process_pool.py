"""QA of the warm pool with real processes: a server that hangs in its own start, and what each setup's ranks see.

A setup's PYTHONPATH starts pool servers of its own (execution/pool.py: loader values), so a sitecustomize there runs
inside the server's start; one that blocks there must cost the run its probe timeout, not hold the sweep (and Ctrl-C)
until it returns. Ranks forked from shared servers must see exactly their own setup's env: the safety pins, their own
RANK/LOCAL_RANK/NCCL_HOSTID, and nothing a previous setup set.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from conftest import assert_no_processes, write_conf

pytestmark = pytest.mark.slow

PINS = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def _hanging_site(tmp_path: Path) -> Path:
    site = tmp_path / "hangsite"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import time\ntime.sleep(600)\n")
    return site


def _hang_conf(tmp_path: Path, timeout_s: int) -> Path:
    return write_conf(tmp_path / "hang.yaml", f"""
backend: gloo
grids: [1x2]
setups:
  hangsite: {{PYTHONPATH: {_hanging_site(tmp_path)}}}
probe:
  timeout_s: {timeout_s}
  collectives: [allreduce]
""")


def _rows(out: Path) -> list[dict]:
    return json.loads((out / "results.json").read_text())["results"]


def test_a_pool_server_hung_in_its_start_costs_the_run_its_timeout_not_the_sweep(cli, tmp_path):
    # Before: the rank's start waited for the server's ready line without a bound, with Ctrl-C deferred; the sweep
    # sat there for the sitecustomize's 600 s whatever probe.timeout_s said.
    out = tmp_path / "o"
    t0 = time.monotonic()
    done = cli.run("sweep", f"conf={_hang_conf(tmp_path, 3)}", "--out", str(out), "--allow-unknown-vars", timeout=90)
    took = time.monotonic() - t0
    assert done.returncode == 1, done.stdout + done.stderr
    (row,) = _rows(out)
    assert row["outcome"] == "timeout" and row["root_cause"]["outcome"] == "timeout", row["root_cause"]
    # the server waited for up to the timeout, then the ranks started cold and met it too
    assert took < 3 + 3 + 40, took
    assert_no_processes(cli.marker)


def test_ctrl_c_while_a_pool_server_hangs_in_its_start_exits_130(cli, tmp_path):
    out = tmp_path / "o"
    driver = cli.popen("sweep", f"conf={_hang_conf(tmp_path, 300)}", "--out", str(out), "--allow-unknown-vars")
    deadline = time.monotonic() + 60
    while not (out / "results.sqlite").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.5)  # the run is waiting for its hung server now
    sent = time.monotonic()
    driver.send_signal(signal.SIGINT)
    try:
        text, _ = driver.communicate(timeout=30)
    except Exception:
        driver.kill()
        driver.communicate()
        raise AssertionError("Ctrl-C did not stop a sweep whose pool server hangs in its start")
    assert driver.returncode == 130, text
    assert time.monotonic() - sent < 10, text
    assert_no_processes(cli.marker)


def test_pooled_ranks_see_their_setups_env_pins_and_rank_variables_and_nothing_of_another_setup(cli, tmp_path):
    cli.env.update(PINS)
    out = tmp_path / "o"
    # setup a sets NCCL_QA_ONLY_A; b, run after it from the same warm servers, must not see it; c unsets a pinned-free
    # variable the caller exported, so its ranks must not see that either
    cli.env["NCCL_QA_CALLER"] = "from-caller"
    conf = write_conf(tmp_path / "env.yaml", """
backend: gloo
grids: [1x2, 2x2]
setups:
  a: {NCCL_QA_ONLY_A: "1", NCCL_ALGO: Ring}
  b: {NCCL_ALGO: Tree}
  c: {NCCL_QA_CALLER: null}
probe:
  timeout_s: 60
  collectives: [allreduce]
""")
    done = cli.run("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars", "--allow-ignored-vars", "--jobs", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = _rows(out)
    assert len(rows) == 6
    for row in rows:
        setup, grid = row["setup"]["name"], row["grid"]
        nodes, ppn = map(int, grid.split("x"))
        for rank in row["ranks"]:
            env, r = rank["env"], rank["rank"]
            where = f"{setup} {grid} rank {r}"
            assert rank["versions"]["start"] == "pooled", where  # forked from a server other setups' ranks came from
            assert {k: env.get(k) for k in PINS} == PINS, where
            assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"]) == (str(r), str(nodes * ppn), str(r % ppn)), where
            if nodes > 1:
                assert env["NCCL_HOSTID"] == f"envmatrix-node{r // ppn}", where
            else:
                assert "NCCL_HOSTID" not in env, where
            assert ("NCCL_QA_ONLY_A" in env) == (setup == "a"), where
            assert env["NCCL_ALGO" if setup != "c" else "RANK"] == {"a": "Ring", "b": "Tree", "c": str(r)}[setup], where
            assert ("NCCL_QA_CALLER" in env) == (setup != "c"), where
    assert_no_processes(cli.marker)


def test_a_pool_server_killed_mid_run_ends_its_rank_at_once_and_the_next_run_gets_a_new_server(tmp_path):
    import os
    import threading

    from envmatrix.engine.launch import free_port
    from envmatrix.execution.pool import WarmPool
    from test_pool import _rank_spec

    marker = "pool-server-killed-" + tmp_path.name
    with WarmPool({**os.environ, "ENVMATRIX_TEST_MARKER": marker}) as pool:
        lonely = _rank_spec(tmp_path, 0, 2, free_port(), marker)  # waits in init for a rank 1 that never comes
        killed_at: list[float] = []

        def kill_server() -> None:
            deadline = time.monotonic() + 60
            while not (tmp_path / "rank0.log").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)
            killed_at.append(time.monotonic())
            os.kill(pool._all[0].proc.pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_server)
        killer.start()
        (out,) = pool.run_group([lonely], timeout_s=60)
        killer.join()
        # the child died with its server (PDEATHSIG): said as its signal when the server's pipe closed, not at the timeout
        assert out.signal == "SIGKILL" and out.killed_by is None, out
        assert time.monotonic() - killed_at[0] < 10
        (ok,) = pool.run_group([_rank_spec(tmp_path, 0, 1, free_port(), marker)], timeout_s=120)
        assert ok.exit_code == 0 and pool.started == {"pooled": 2, "cold": 0}
    assert_no_processes(marker)


def test_a_pool_servers_child_forked_ahead_that_died_is_replaced_and_the_server_serves_on(tmp_path):
    import os

    from conftest import processes_with_marker
    from envmatrix.engine.launch import free_port
    from envmatrix.execution.pool import WarmPool
    from test_pool import _rank_spec

    marker = "pool-spare-killed-" + tmp_path.name
    with WarmPool({**os.environ, "ENVMATRIX_TEST_MARKER": marker}) as pool:
        (first,) = pool.run_group([_rank_spec(tmp_path, 0, 1, free_port(), marker)], timeout_s=120)
        assert first.exit_code == 0
        server = pool._all[0].proc.pid
        deadline = time.monotonic() + 10
        while not (spares := [p for p in processes_with_marker(marker) if p != server]) and time.monotonic() < deadline:
            time.sleep(0.05)
        for spare in spares:  # the child waiting for the next run (killed as an OOM killer would)
            os.kill(spare, signal.SIGKILL)
        time.sleep(0.3)
        # before: the server died of the broken pipe to it, and the run started cold
        (second,) = pool.run_group([_rank_spec(tmp_path, 0, 1, free_port(), marker)], timeout_s=120)
        assert second.exit_code == 0 and pool.started == {"pooled": 2, "cold": 0} and pool._all[0].alive
    assert_no_processes(marker)
