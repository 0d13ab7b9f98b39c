"""envmatrix bisect with real rank processes: gloo culprits, flaky command probes, --failing from a sweep."""

import json
import sys

import pytest

from conftest import write_conf

pytestmark = pytest.mark.slow

# Seed 003's block (0) stands again, verbatim, in test_bisect_envfile.py and benchmarks/h200_bisect/seed003_env0.sh;
# this copy is shaped for the counts asserted below (9 atoms: one culprit added, the CQ size left out).
SEED_003_WITH_GLOO_CULPRIT = """
# seed 003's block (0), plus one variable that really breaks gloo on this host
export NCCL_NET_GDR_LEVEL=PHB
export NCCL_CROSS_NIC=1
export NCCL_COLLNET_ENABLE=1
export NCCL_NET="AWS Libfabric"
export LD_LIBRARY_PATH=/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib:$LD_LIBRARY_PATH
export LD_LIBRARY_PATH=/soft/libraries/hwloc/lib/:$LD_LIBRARY_PATH
export FI_CXI_DISABLE_HOST_REGISTER=1
export GLOO_SOCKET_IFNAME=envmx_missing0
export FI_MR_CACHE_MONITOR=userfaultfd
"""


def test_gloo_culprit_among_harmless_variables(cli, tmp_path):
    env_file = tmp_path / "env0.sh"
    env_file.write_text(SEED_003_WITH_GLOO_CULPRIT)
    out = tmp_path / "run"
    done = cli.run(
        "bisect", "backend=gloo", "probe.collectives=[allreduce]", "probe.timeout_s=30",
        "--grid", "1x2", "--env-file", str(env_file), "--out", str(out), "--json", str(tmp_path / "r.json"),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    (report,) = json.loads((tmp_path / "r.json").read_text())
    assert report["culprits"] == [["GLOO_SOCKET_IFNAME=envmx_missing0"]]
    assert report["complete"] and "envmx_missing0" in report["original_failure"]["line"]
    assert len(report["atoms"]) == 9  # both LD_LIBRARY_PATH prepends are atoms of their own
    assert report["probes_launched"] <= 9 + 1  # search + certificates, then one repair probe (unset)
    # the repair's unset probe of a single culprit is the search's own repaired-env check: no extra launch
    assert report["search_probes"] == report["probes_launched"]
    assert [r["outcome"] for r in report["repairs"]] == ["pass"]
    assert "GLOO_SOCKET_IFNAME" not in " ".join(report["recommended_env"])
    md = (out / "bisect_env0_1x2.md").read_text()
    # the trail row: the failing env first (0), then the search; a passing probe (1) proves the baseline
    row = next(line for line in md.splitlines() if line.startswith("| 1x2 |"))
    assert row.startswith("| 1x2 | 0 |") and "| 1 |" in row and "## Culprits" in md


FLAKY = """
import os, random, sys
# Fails when both ENVMATRIX_A and ENVMATRIX_B are set (an interaction); 20% of answers flip.
path = os.environ["FLAKY_COUNTER"]
n = int(open(path).read()) if os.path.exists(path) else 0
open(path, "w").write(str(n + 1))
rng = random.Random(n * 7919 + 17)
fails = "ENVMATRIX_A" in os.environ and "ENVMATRIX_B" in os.environ
if rng.random() < 0.2:
    fails = not fails
sys.exit(1 if fails else 0)
"""


def test_flaky_command_probe_with_repeats(cli, tmp_path):
    script = tmp_path / "flaky.py"
    script.write_text(FLAKY)
    env_file = tmp_path / "env.sh"
    env_file.write_text("".join(f"export ENVMATRIX_{c}=1\n" for c in "ABCDEFGH"))
    cli.env["FLAKY_COUNTER"] = str(tmp_path / "counter")
    done = cli.run(
        "bisect", "backend=gloo", "--grid", "1x1", "--env-file", str(env_file), "--probe-cmd", f"{sys.executable} {script}",
        "--repeats", "3", "--allow-unknown-vars", "--no-repair", "--json", str(tmp_path / "r.json"), "--out", str(tmp_path / "o"),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    (report,) = json.loads((tmp_path / "r.json").read_text())
    assert report["culprits"] == [["ENVMATRIX_A=1", "ENVMATRIX_B=1"]]


def test_failing_grid_from_the_last_sweep(cli, tmp_path):
    conf = write_conf(
        tmp_path / "s.yaml",
        """
backend: gloo
grids: [1x2]
setups:
  ok: {}
  broken: {NCCL_ALGO: Ring, GLOO_SOCKET_IFNAME: envmx_missing0, NCCL_PROTO: Simple}
probe: {timeout_s: 30, collectives: [allreduce]}
""",
    )
    out = tmp_path / "o"
    assert cli.run("sweep", f"conf={conf}", "--out", str(out)).returncode == 1  # a cell failed
    done = cli.run("bisect", f"conf={conf}", "--failing", "1x2", "--out", str(out), "--json", str(tmp_path / "r.json"), "--no-repair")
    assert done.returncode == 1, done.stdout + done.stderr
    (report,) = json.loads((tmp_path / "r.json").read_text())
    assert report["name"] == "broken" and report["culprits"] == [["GLOO_SOCKET_IFNAME=envmx_missing0"]]
    # the failing env and the empty baseline were already in the sweep's store: free probes, not launched again
    assert report["free_probes"] == 2 and report["probes_launched"] == len(report["trail"]) - 2  # the trail shows them too
    # --baseline SETUP (env bisect's meaning, not a threshold run) bisects against that setup's env
    again = cli.run("bisect", f"conf={conf}", "--failing", "1x2", "--setup", "broken", "--baseline", "ok", "--out", str(out),
                    "--json", str(tmp_path / "r2.json"), "--no-repair")
    assert again.returncode == 1, again.stdout + again.stderr
    (report,) = json.loads((tmp_path / "r2.json").read_text())
    assert report["culprits"] == [["GLOO_SOCKET_IFNAME=envmx_missing0"]]


def test_bisect_bad_input(cli, tmp_path):
    done = cli.run("bisect", "backend=gloo", "--failing", "2x2", "--out", str(tmp_path / "none"))
    assert done.returncode == 2 and "no store" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    bad = tmp_path / "bad.sh"
    bad.write_text("export NCCL_ALGO=$(cat /etc/algo)\n")
    done = cli.run("bisect", "backend=gloo", "--grid", "1x2", "--env-file", str(bad))
    assert done.returncode == 2 and f"{bad}:1" in done.stderr
    env = tmp_path / "env.sh"
    env.write_text("export NCCL_ALGO=Ring\n")
    done = cli.run("bisect", "backend=gloo", "--grid", "1x2", "--env-file", str(env), "--tolerance", "5%", "--out", str(tmp_path / "t"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--tolerance 5%: only with --hosts FILE --baseline RUN_DIR" in done.stderr and not (tmp_path / "t").exists()
