"""A dry run is how a submission is checked before there is an allocation (issue 39 point 7): srun and mpiexec
dry runs outside one show the launch with placeholders for the allocation's values; a real run is still refused.
And --out may name any new directory (only the default run directory lives under reports/runs/)."""

import os

import pytest


@pytest.mark.parametrize("launcher,var", [("srun", "SLURM_JOB_ID"), ("mpiexec", "PBS_JOBID")])
def test_dry_run_outside_an_allocation_shows_placeholders(cli, tmp_path, launcher, var):
    for name in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "PBS_JOBID", "PBS_NODEFILE"):
        cli.env.pop(name, None)
    done = cli.run("sweep", "backend=gloo", f"launcher={launcher}", "grids=[2x2]", "--dry-run", "--allow-ignored-vars",
                   "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "<node1>" in done.stdout and "<node2>" in done.stdout and launcher in done.stdout, done.stdout
    assert f"placeholders" in done.stdout + done.stderr and var in done.stdout + done.stderr
    real = cli.run("sweep", "backend=gloo", f"launcher={launcher}", "grids=[2x2]", "--allow-ignored-vars",
                   "--out", str(tmp_path / "o"))
    assert real.returncode == 2 and "no allocation" in real.stderr
    assert not (tmp_path / "o").exists()


def test_out_may_be_any_new_directory_and_the_docs_say_so(cli, tmp_path):
    from conftest import REPO

    text = (REPO / "docs" / "configuration.md").read_text()
    assert "run directories must resolve under `reports/runs/`" not in text
    assert "`--out` may name any\n  directory" in text or "`--out` may name any directory" in text
