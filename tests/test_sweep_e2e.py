"""End to end through the real CLI: real rank processes, real torch.distributed (gloo)."""

import json
import os
import signal
import sqlite3
import sys
import time

import pytest

from conftest import assert_no_processes, write_conf

pytestmark = pytest.mark.slow

GLOO_CONF = """
name: gloo_matrix
backend: gloo
grids: [1x2, 2x1, 2x2]
setups:
  baseline: {}
  debug_detail: {TORCH_DISTRIBUTED_DEBUG: DETAIL}
  missing_if: {GLOO_SOCKET_IFNAME: envmx_missing0}
probe:
  timeout_s: 60
  collectives: [allreduce, allgather, alltoall]
"""


def _results(out):
    return json.loads((out / "results.json").read_text())


def test_gloo_sweep_matrix_shows_the_real_failure(cli, tmp_path):
    conf = write_conf(tmp_path / "gloo.yaml", GLOO_CONF)
    out = tmp_path / "run"
    done = cli.run("sweep", f"conf={conf}", "--out", str(out))
    assert done.returncode == 1, done.stderr + done.stdout
    data = _results(out)
    assert data["matrix"] == {
        g: {"baseline": "1", "debug_detail": "1", "missing_if": "0"} for g in ("1x2", "2x1", "2x2")
    }
    failed = [r for r in data["results"] if r["outcome"] != "pass"]
    assert {r["outcome"] for r in failed} == {"init_error"}
    assert all("envmx_missing0" in r["root_cause"]["line"] for r in failed)
    passed = [r for r in data["results"] if r["outcome"] == "pass"]
    rank = passed[0]["ranks"][0]
    assert rank["versions"]["torch"].startswith("2.") and rank["checks"] and not any(c["wrong"] for c in rank["checks"])
    two_by_two = next(r for r in passed if r["grid"] == "2x2" and r["setup"]["name"] == "debug_detail")
    hostids = {r["env"].get("NCCL_HOSTID") for r in two_by_two["ranks"]}
    assert hostids == {"envmatrix-node0", "envmatrix-node1"}
    assert all(r["env"]["TORCH_DISTRIBUTED_DEBUG"] == "DETAIL" for r in two_by_two["ranks"])
    # the local launcher starts one process per rank; each argv is recorded with the result
    assert len(two_by_two["argv"]) == 4 and all("envmatrix.rank.main" in a for a in two_by_two["argv"])
    md = (out / "matrix.md").read_text()
    assert "| 2x2 | 1 | 1 | 0 |" in md and "GLOO_SOCKET_IFNAME=envmx_missing0" in md and "init_error" in md
    with sqlite3.connect(out / "results.sqlite") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 9
    again = cli.run("sweep", f"conf={conf}", "--out", str(out), "--fail-on-failure")
    assert again.returncode == 1 and "9 already in the store" in again.stdout
    assert_no_processes(cli.marker)


def test_hanging_probe_is_killed_within_timeout_plus_5s(cli, tmp_path):
    conf = write_conf(
        tmp_path / "hang.yaml",
        """
backend: gloo
grids: [1x2]
setups: {plain: {}}
probe:
  name: command
  timeout_s: 3
  command: [%s, -c, "import subprocess, time; subprocess.Popen(['sleep', '600']); time.sleep(600)"]
"""
        % sys.executable,
    )
    t0 = time.monotonic()
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    assert done.returncode == 1, done.stderr
    (result,) = _results(tmp_path / "o")["results"]
    assert result["outcome"] == "timeout"
    assert result["duration_s"] <= 3 + 5
    assert all(r["killed_by"] == "timeout" and r["signal"] == "SIGKILL" for r in result["ranks"])
    assert time.monotonic() - t0 < 60
    assert_no_processes(cli.marker)


def test_crash_and_unresolved_command_probes(cli, tmp_path):
    conf = write_conf(
        tmp_path / "c.yaml",
        f"""
backend: gloo
grids: [1x2]
setups:
  segv: {{ENVMATRIX_T: segv}}
  skip: {{ENVMATRIX_T: skip}}
probe:
  name: command
  timeout_s: 20
  command: [{sys.executable}, -c, "import os, signal, sys; t = os.environ['ENVMATRIX_T']; os.kill(os.getpid(), signal.SIGSEGV) if t == 'segv' else sys.exit(125)"]
""",
    )
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"), "--allow-unknown-vars")
    assert done.returncode == 1, done.stderr
    by_setup = {r["setup"]["name"]: r for r in _results(tmp_path / "o")["results"]}
    assert by_setup["segv"]["outcome"] == "crash" and by_setup["segv"]["ranks"][0]["signal"] == "SIGSEGV"
    assert by_setup["skip"]["outcome"] == "unresolved"


def test_kill_9_of_driver_then_resume_loses_and_repeats_nothing(cli, tmp_path):
    setups = "\n".join(f"  s{i}: {{ENVMATRIX_T: '{i}'}}" for i in range(6))
    conf = write_conf(
        tmp_path / "slow.yaml",
        f"""
backend: gloo
grids: [1x1]
setups:
{setups}
probe:
  name: command
  timeout_s: 30
  command: [{sys.executable}, -c, "import time; time.sleep(1.0)"]
""",
    )
    out = tmp_path / "o"
    driver = cli.popen("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars")
    db_path = out / "results.sqlite"
    deadline = time.time() + 60
    done_before = 0
    while time.time() < deadline:
        if db_path.exists():
            with sqlite3.connect(db_path) as db:
                try:
                    done_before = db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
                except sqlite3.OperationalError:
                    done_before = 0
            if done_before >= 2:
                break
        time.sleep(0.1)
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    assert 2 <= done_before < 6
    assert_no_processes(cli.marker)  # PDEATHSIG took the orphaned rank down
    with sqlite3.connect(db_path) as db:
        before = db.execute("SELECT run_key, seq FROM results ORDER BY seq").fetchall()
    resumed = cli.run("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars")
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(before)} already in the store" in resumed.stdout
    with sqlite3.connect(db_path) as db:
        after = db.execute("SELECT run_key, seq FROM results ORDER BY seq").fetchall()
        per_key = db.execute("SELECT run_key, COUNT(*) FROM results GROUP BY run_key").fetchall()
    assert after[: len(before)] == before
    assert len(after) == 6 and all(n == 1 for _, n in per_key)


def test_safety_pins_reach_every_rank(cli, tmp_path):
    conf = write_conf(tmp_path / "p.yaml", "backend: gloo\ngrids: [2x1]\nsetups: {plain: {}}\nprobe: {timeout_s: 60, collectives: [allreduce]}\n")
    cli.env.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr
    (result,) = _results(tmp_path / "o")["results"]
    for rank in result["ranks"]:
        assert rank["env"]["NCCL_NVLS_ENABLE"] == "0"
        assert rank["env"]["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
        assert rank["env"]["NVSHMEM_DISABLE_NVLS"] == "1"


def test_default_sweep_without_arguments(cli):
    done = cli.run("sweep")
    assert done.returncode == 0, done.stderr
    data = json.loads((cli.cwd / "reports" / "runs" / "default" / "results.json").read_text())
    assert set(data["matrix"]) == {"1x2", "2x1", "2x2"}
    assert all(cell == "1" for row in data["matrix"].values() for cell in row.values())
    assert "12 passed, 0 failed" in done.stdout
