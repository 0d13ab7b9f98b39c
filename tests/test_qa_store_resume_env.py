"""What a resumed sweep reuses and what it runs again when the config or the caller's environment changed between runs,
with real sweeps (a QA pass's findings). A changed env never reuses an old result."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from conftest import assert_no_processes, write_conf
from envmatrix.engine.trial import inherited_env

# passes unless the rank inherited NCCL_IB_HCA=mlx5_bad (a caller's export, not the setup's)
PROBE = f"[{sys.executable}, -c, \"import os, sys; sys.exit(os.environ.get('NCCL_IB_HCA') == 'mlx5_bad')\"]"


def _conf(path: Path, setups: str) -> str:
    write_conf(path, f"name: qa_env\nbackend: gloo\ngrids: [1x1]\nsetups:\n{setups}\n"
                     f"probe: {{name: command, timeout_s: 30, command: {PROBE}}}\n")
    return f"conf={path}"


def _rows(out: Path) -> list[tuple]:
    with sqlite3.connect(out / "results.sqlite") as db:
        return db.execute("SELECT setup_name, attempt, outcome, result_json FROM results ORDER BY seq").fetchall()


@pytest.mark.slow
def test_a_sweep_resumed_under_another_inherited_env_runs_again(cli, tmp_path):
    # The run key hashes the setup only: a sweep resumed after the caller exported NCCL_IB_HCA (or loaded another
    # NCCL module: LD_LIBRARY_PATH) reused every stored result, '1 already in the store', exit 0, though its ranks
    # would now fail.
    conf, out = _conf(tmp_path / "c.yaml", "  a: {NCCL_ALGO: Ring}"), tmp_path / "o"
    sweep = ("sweep", conf, "--out", str(out), "--allow-unknown-vars")
    cli.env.pop("NCCL_IB_HCA", None)
    first = cli.run(*sweep)
    assert first.returncode == 0 and "0 already in the store" in first.stdout, first.stdout + first.stderr
    cli.env["NCCL_IB_HCA"] = "mlx5_bad"
    changed = cli.run(*sweep)
    assert changed.returncode == 1 and "0 already in the store" in changed.stdout, changed.stdout + changed.stderr
    again = cli.run(*sweep)  # the same caller env: reused
    assert again.returncode == 1 and "1 already in the store" in again.stdout, again.stdout + again.stderr
    # what is the caller's and what is per run or envmatrix's own: a new marker and other GPUs reuse
    cli.env.update(ENVMATRIX_TEST_MARKER=cli.marker + "x", CUDA_VISIBLE_DEVICES="3", MASTER_PORT="1")
    moved = cli.run(*sweep)
    assert moved.returncode == 1 and "1 already in the store" in moved.stdout, moved.stdout + moved.stderr
    rows = _rows(out)
    assert [(name, attempt, outcome) for name, attempt, outcome, _ in rows] == [("a", 1, "pass"), ("a", 2, "exit_error")]
    stored = [json.loads(blob)["inherited_env"] for *_, blob in rows]
    assert "NCCL_IB_HCA" not in stored[0] and stored[1]["NCCL_IB_HCA"] == "mlx5_bad"
    assert not any(k.startswith(("ENVMATRIX_", "MASTER_")) or k == "CUDA_VISIBLE_DEVICES" for k in stored[1])
    assert_no_processes(cli.marker)


@pytest.mark.slow
def test_config_edits_between_runs_rerun_exactly_the_changed_setups(cli, tmp_path):
    out = tmp_path / "o"
    sweep = ("--out", str(out), "--allow-unknown-vars")
    first = cli.run("sweep", _conf(tmp_path / "c1.yaml", "  a: {NCCL_ALGO: Ring, NCCL_PROTO: LL}\n  b: {NCCL_ALGO: Tree}"),
                    *sweep)
    assert first.returncode == 0 and "sweep: 2 runs, 0 already" in first.stdout, first.stdout + first.stderr
    # setups reordered, b's value changed, c added, a renamed: a is reused under its new name, b and c run
    edited = _conf(tmp_path / "c2.yaml", "  c: {NCCL_ALGO: Ring}\n  b: {NCCL_ALGO: Ring, NCCL_PROTO: Simple}\n"
                                         "  a2: {NCCL_ALGO: Ring, NCCL_PROTO: LL}")
    second = cli.run("sweep", edited, *sweep)
    assert second.returncode == 0 and "sweep: 3 runs, 1 already" in second.stdout, second.stdout + second.stderr
    # the variables of a2 in another order: the same env, never a different one; today a new run key (run again)
    swapped = cli.run("sweep", _conf(tmp_path / "c3.yaml", "  a2: {NCCL_PROTO: LL, NCCL_ALGO: Ring}"), *sweep)
    assert swapped.returncode == 0, swapped.stdout + swapped.stderr
    per_env = {}
    for _, _, _, blob in _rows(out):
        result = json.loads(blob)
        env = tuple(sorted((a["var"], a["value"]) for a in result["setup"]["atoms"]))
        per_env.setdefault(env, []).append(result["setup"]["name"])
        assert result["ranks"][0]["env"]["NCCL_ALGO"] == dict(env)["NCCL_ALGO"]  # what the rank saw is the setup's
    assert per_env[(("NCCL_ALGO", "Tree"),)] == ["b"]
    assert per_env[(("NCCL_ALGO", "Ring"),)] == ["c"]
    assert per_env[(("NCCL_ALGO", "Ring"), ("NCCL_PROTO", "Simple"))] == ["b"]
    assert per_env[(("NCCL_ALGO", "Ring"), ("NCCL_PROTO", "LL"))][0] == "a"  # stored under its first name, reused
    with open(out / "results.json") as fh:
        matrix = json.load(fh)["matrix"]
    assert all(cell == "1" for row in matrix.values() for cell in row.values()), matrix
    assert_no_processes(cli.marker)


def test_inherited_env_is_the_callers_echoed_families_less_what_each_run_sets():
    environ = {"NCCL_IB_HCA": "mlx5_0", "LD_LIBRARY_PATH": "/opt/nccl/lib", "FI_PROVIDER": "efa", "PATH": "/bin",
               "HOME": "/root", "MASTER_ADDR": "h", "RANK": "0", "ENVMATRIX_TEST_MARKER": "m", "CUDA_VISIBLE_DEVICES": "0",
               "NCCL_NVLS_ENABLE": "0"}
    assert inherited_env(environ) == {"FI_PROVIDER": "efa", "LD_LIBRARY_PATH": "/opt/nccl/lib", "NCCL_IB_HCA": "mlx5_0",
                                      "NCCL_NVLS_ENABLE": "0", "PATH": "/bin"}  # PATH: which nccl-tests runs
