"""What a stored result carries, from real sweeps (a QA pass's findings): README's results.json promise, 'the env
each rank saw'."""

from __future__ import annotations

import json
import sys

from conftest import assert_no_processes, write_conf


def test_command_probe_ranks_record_the_env_they_were_started_with(cli, tmp_path):
    # A command probe under the local launcher echoes no env (no shim, no rank report): every rank's env was {}.
    conf = write_conf(tmp_path / "c.yaml", f"""
name: rank_env
backend: gloo
grids: [2x1]
setups:
  s: {{ENVMATRIX_QA: 'x', LD_LIBRARY_PATH: {{prepend: [/opt/qa/lib]}}}}
probe:
  name: command
  timeout_s: 60
  command: [{sys.executable}, -c, "import os, sys; sys.exit(int(os.environ['RANK']))"]
""")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"), "--allow-unknown-vars")
    assert done.returncode == 1, done.stdout + done.stderr  # rank 1 exits 1
    (result,) = json.loads((tmp_path / "o" / "results.json").read_text())["results"]
    ranks = sorted(result["ranks"], key=lambda r: r["rank"])
    for rank in ranks:
        env = rank["env"]
        assert env["ENVMATRIX_QA"] == "x" and env["RANK"] == str(rank["rank"]) and env["WORLD_SIZE"] == "2", env
        assert env["NCCL_HOSTID"].endswith(f"node{rank['rank']}") and env["LD_LIBRARY_PATH"].startswith("/opt/qa/lib")
        assert "ENVMATRIX_TEST_MARKER" in env and "PATH" not in env  # the echoed slice, as a rank's own echo
    assert ranks[1]["outcome"] != "pass"
    assert_no_processes(cli.marker)
