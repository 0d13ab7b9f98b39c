"""`envmatrix submit` to a real Slurm (tests/slurm_cluster.py): sbatch reads the rendered directives (an --output
with a space, quoted), and the job runs the envmatrix search it was given from the directory it was made in (a name
with a space, a quote and $), writing the study there. The fake nccl-tests at the process boundary."""

import re
import subprocess
import sys
import time

import pytest

from search_helpers import FAKE, load
from slurm_cluster import slurm  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow


def test_a_submitted_search_runs_in_the_allocation_from_where_it_was_made(slurm, tmp_path):  # noqa: F811
    cwd = tmp_path / "job 'dir' $HOME"
    cwd.mkdir()
    (cwd / "my conf.yaml").write_text(f"""
name: fake
backend: gloo
grids: [1x1]
probe: {{name: command, timeout_s: 60, command: [{sys.executable}, {FAKE}]}}
search:
  trials: 2
  confirm_top_k: 0
  baseline: false
  space: {{NCCL_ALGO: [Ring, Tree]}}
  objective: {{collective: allreduce, size: 1M}}
""")
    done = subprocess.run([sys.executable, "-m", "envmatrix", "submit", "--output", "job out %j.log", "--time", "5",
                           "--script", "job.sh", "--", "search", "conf=./my conf.yaml", "--out", "run dir"],
                          cwd=cwd, env=slurm, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    job = re.search(r"submitted job (\d+); script job.sh", done.stdout)
    assert job, done.stdout
    log = cwd / f"job out {job.group(1)}.log"
    deadline = time.time() + 180
    while time.time() < deadline:
        queue = subprocess.run(["squeue", "-h", "-j", job.group(1)], env=slurm, capture_output=True, text=True)
        if not queue.stdout.strip() and log.exists():
            break
        time.sleep(1)
    else:
        subprocess.run(["scancel", job.group(1)], env=slurm, capture_output=True, timeout=60)
        pytest.fail(f"job {job.group(1)} did not end in 180 s; {log.exists() and log.read_text()}")
    text = log.read_text()
    assert "stopped: the study holds 2 trials" in text, text
    study = load(cwd / "run dir")
    assert sorted(t.params["NCCL_ALGO"] for t in study.trials) == ["Ring", "Tree"]
