"""QA of rank placement with real ranks: the env each rank saw (its own echo, or the shim's report under mpirun) holds
the safety pins, its own RANK/WORLD_SIZE/LOCAL_RANK, NCCL_HOSTID per emulated node, and nothing of another setup or
grid, started cold (--no-pool) and under the real mpirun."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import assert_no_processes, write_conf

pytestmark = pytest.mark.slow

PINS = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


@pytest.mark.parametrize("launcher, flags", [("local", ("--no-pool",)), ("mpirun", ())], ids=["local-cold", "mpirun"])
def test_each_rank_sees_the_pins_its_own_rank_variables_and_only_its_setups_env(cli, tmp_path, launcher, flags):
    if launcher == "mpirun" and shutil.which("mpirun") is None:
        pytest.skip("mpirun is not installed (.ci/run installs openmpi-bin)")
    cli.env.update(PINS)
    cli.env["NCCL_QA_CALLER"] = "from-caller"
    out = tmp_path / "o"
    conf = write_conf(tmp_path / "env.yaml", f"""
backend: gloo
launcher: {launcher}
grids: [2x2, 1x2]
setups:
  a: {{NCCL_QA_ONLY_A: "1", NCCL_ALGO: Ring}}
  b: {{NCCL_ALGO: Tree, NCCL_QA_CALLER: null}}
probe:
  timeout_s: 90
  collectives: [allreduce]
""")
    done = cli.run("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars", "--allow-ignored-vars", *flags)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads((out / "results.json").read_text())["results"]
    assert sorted((r["setup"]["name"], r["grid"]) for r in rows) == [("a", "1x2"), ("a", "2x2"), ("b", "1x2"), ("b", "2x2")]
    for row in rows:
        setup, (nodes, ppn) = row["setup"]["name"], map(int, row["grid"].split("x"))
        for rank in row["ranks"]:
            env, r = rank["env"], rank["rank"]
            where = f"{setup} {row['grid']} rank {r}: {env}"
            assert {k: env.get(k) for k in PINS} == PINS, where
            assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"]) == (str(r), str(nodes * ppn), str(r % ppn)), where
            assert env.get("NCCL_HOSTID") == (f"envmatrix-node{r // ppn}" if nodes > 1 else None), where
            assert env["NCCL_ALGO"] == {"a": "Ring", "b": "Tree"}[setup], where
            assert ("NCCL_QA_ONLY_A" in env) == (setup == "a"), where
            assert env.get("NCCL_QA_CALLER") == ("from-caller" if setup == "a" else None), where
    assert_no_processes(cli.marker)
