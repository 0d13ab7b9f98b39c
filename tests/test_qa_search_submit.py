"""QA pass on `envmatrix submit` as a user runs it: the rendered script passes `bash -n`, and the working directory and
envmatrix command line it runs are the ones given, values with spaces, quotes and $ included; a PBS walltime is one
qsub takes and means what the Slurm one means; a --script folder that cannot be made is bad input."""

import subprocess
import sys

import pytest


def submit(cwd, *args):
    return subprocess.run([sys.executable, "-m", "envmatrix", "submit", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def line_words(script: str, start: str) -> list[str]:
    """The words bash makes of the script's line that starts with ``start`` (the words, not their expansion)."""
    line = next(l for l in script.splitlines() if l.startswith(start + " "))
    done = subprocess.run(["bash", "-c", f'printf "%s\\0" {line[len(start) + 1:]}'], capture_output=True, text=True,
                          timeout=10, env={"HOME": "/nowhere"})
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\0")[:-1]


@pytest.mark.parametrize("scheduler", ["slurm", "pbs"])
def test_the_script_runs_the_command_as_given_from_the_directory_it_was_made_in(tmp_path, scheduler):
    cwd = tmp_path / "run 'a' $HOME"
    cwd.mkdir()
    command = ["search", "conf=./my conf.yaml", "search.storage='sqlite:///x y.db'", "probe.command='echo $HOME \"q\"'",
               "--trials", "3"]
    done = submit(cwd, "--print", "--scheduler", scheduler, "--nodes", "2", "--output", "out put.log", "--", *command)
    assert done.returncode == 0, done.stderr
    syntax = subprocess.run(["bash", "-n"], input=done.stdout, capture_output=True, text=True, timeout=10)
    assert syntax.returncode == 0, syntax.stderr + done.stdout
    assert line_words(done.stdout, "cd") == [str(cwd)]
    assert line_words(done.stdout, "exec") == [sys.executable, "-m", "envmatrix", *command]


@pytest.mark.parametrize("given, pbs", [("1-00:00:00", "24:00:00"), ("2-01:02:03", "49:02:03"), ("90", "01:30:00"),
                                        ("1:30", "00:01:30"), ("01:00:00", "01:00:00")])
def test_a_pbs_walltime_is_hh_mm_ss_meaning_what_slurm_reads(tmp_path, given, pbs):
    done = submit(tmp_path, "--print", "--scheduler", "pbs", "--time", given, "--", "search", "conf=x.yaml")
    assert done.returncode == 0, done.stderr
    assert f"#PBS -l walltime={pbs}\n" in done.stdout
    slurm = submit(tmp_path, "--print", "--time", given, "--", "search", "conf=x.yaml")
    assert f"#SBATCH --time={given}\n" in slurm.stdout  # Slurm reads its own forms


@pytest.mark.parametrize("given", ["0", "00:00:00", "0-0"])
def test_a_zero_walltime_is_slurms_no_limit_and_refused_for_pbs(tmp_path, given):
    # PBS got '#PBS -l walltime=00:00:00' for --time 0, which Slurm reads as no limit
    slurm = submit(tmp_path, "--print", "--time", given, "--", "search", "conf=x.yaml")
    assert slurm.returncode == 0 and f"#SBATCH --time={given}\n" in slurm.stdout, slurm.stderr
    pbs = submit(tmp_path, "--print", "--scheduler", "pbs", "--time", given, "--", "search", "conf=x.yaml")
    assert pbs.returncode == 2 and pbs.stdout == "", pbs.stdout
    assert pbs.stderr.count("\n") == 1 and f"--time: {given!r} is a walltime of zero for PBS" in pbs.stderr, pbs.stderr


def test_a_script_folder_that_cannot_be_made_is_bad_input(tmp_path):
    done = submit(tmp_path, "--script", "/proc/envmatrix_qa/job.sh", "--", "search", "conf=x.yaml")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "--script '/proc/envmatrix_qa/job.sh'" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_directive_whose_quote_does_not_close_is_bad_input(tmp_path):
    done = submit(tmp_path, "--print", "--directive", "--comment='two words", "--", "search", "conf=x.yaml")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "--directive: \"--comment='two words\": No closing quotation" in done.stderr
    assert done.stdout == ""
