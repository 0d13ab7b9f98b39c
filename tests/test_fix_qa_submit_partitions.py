"""envmatrix submit --queue: Slurm's --partition takes a comma list (sbatch -p gpu,debug: whichever starts the job
first); submit refused it ("letters, digits and _ . + -", exit 2). PBS's -q still takes one queue."""

import subprocess
import sys

import pytest

from envmatrix.errors import ConfigError
from envmatrix.launchers.submit import BatchSpec, render


def test_slurm_partition_list_is_rendered():
    done = subprocess.run([sys.executable, "-m", "envmatrix", "submit", "--queue", "gpu,debug", "--print", "--",
                           "sweep"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "\n#SBATCH --partition=gpu,debug\n" in done.stdout


def _spec(scheduler, queue):
    return BatchSpec(scheduler=scheduler, envmatrix_args=("sweep",), python=sys.executable, workdir="/tmp", queue=queue)


@pytest.mark.parametrize("bad", ["gpu,,debug", "gpu,", ",gpu", "gpu debug", "gpu,$(id)"])
def test_bad_partition_lists_are_refused(bad):
    with pytest.raises(ConfigError, match="--queue"):
        render(_spec("slurm", bad))


def test_pbs_queue_is_one_name():
    with pytest.raises(ConfigError, match="one queue name"):
        render(_spec("pbs", "gpu,debug"))
    assert "\n#PBS -q workq\n" in render(_spec("pbs", "workq"))
