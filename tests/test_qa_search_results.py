"""QA pass on `envmatrix search` / `export` as a user runs them: a study whose every trial failed is a failure
(exit 1), and an export into a directory an earlier export wrote leaves none of that export's files behind.
Real search processes, the fake nccl-tests at the process boundary."""

import subprocess
import sys

import pytest

from conftest import assert_no_processes
from search_helpers import FAKE, load, run_search

pytestmark = pytest.mark.slow


def conf(path, space, *extra):
    path.write_text(f"""
name: {path.stem}
backend: gloo
grids: [1x1]
probe: {{name: command, timeout_s: 60, command: [{sys.executable}, {FAKE}]}}
search:
  trials: 3
  space: {space}
  objective: {{collective: allreduce, size: 1M}}
""" + "".join(f"  {line}\n" for line in extra))
    return path


def export(cli, run_dir, dest):
    return subprocess.run([sys.executable, "-m", "envmatrix", "export", "--out", str(run_dir), "--dest", str(dest)],
                          cwd=cli.cwd, env=cli.env, capture_output=True, text=True, timeout=120)


def test_a_study_whose_every_trial_failed_exits_1_naming_the_failures(cli, tmp_path):
    # the fake fails Tree with LL128 as NCCL does; one allowed combination, so one trial, below max_failure_rate's 3
    done = run_search(cli, "search", f"conf={conf(tmp_path / 'allfail.yaml', '{NCCL_ALGO: [Tree], NCCL_PROTO: [LL128]}')}",
                      "--out", str(tmp_path / "run"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "none of the 1 trials of study 'allfail' completed (1 " in done.stderr, done.stderr
    assert "nothing to export" in done.stderr and "Traceback" not in done.stderr
    assert "no completed trial yet" in (tmp_path / "run" / "search.md").read_text()  # the report is still written
    none = export(cli, tmp_path / "run", tmp_path / "best")
    # the trials failed: exit 1 as the search's own (it was 2, bad input, though the study is well formed)
    assert none.returncode == 1 and "has no completed trial yet (1 failed: search.md lists why)" in none.stderr, none.stderr
    assert not (tmp_path / "best").exists()
    assert_no_processes(cli.marker)


def test_a_study_with_no_finished_trial_exports_nothing_and_is_inconclusive(cli, tmp_path):
    # search.budget_s shorter than one probe: the search ends inconclusive (3) before any trial finishes; export said
    # "bad input" (2) of the same study
    done = run_search(cli, "search", f"conf={conf(tmp_path / 'short.yaml', '{NCCL_ALGO: [Ring, Tree]}', 'budget_s: 0.001')}",
                      "--out", str(tmp_path / "run"))
    assert done.returncode == 3, done.stdout + done.stderr
    none = export(cli, tmp_path / "run", tmp_path / "best")
    assert none.returncode == 3 and "has no completed trial yet" in none.stderr, none.stderr
    assert not (tmp_path / "best").exists()
    assert_no_processes(cli.marker)


def test_export_into_an_earlier_exports_directory_leaves_none_of_its_files(cli, tmp_path):
    dest = tmp_path / "best"
    pinned = run_search(cli, "search", f"conf={conf(tmp_path / 'pinned.yaml', '{NCCL_ALGO: [Ring], NCCL_PROTO: [LL128, Simple]}')}",
                        "--out", str(tmp_path / "pinned"))
    assert pinned.returncode == 0, pinned.stdout + pinned.stderr
    first = export(cli, tmp_path / "pinned", dest)
    assert first.returncode == 0 and (dest / "tuner.csv").is_file() and (dest / "best_setup.yaml").is_file(), first.stdout
    # NCCL's default (4 channels) beats this space's one row: the confirmed verdict keeps the default, exports no variable
    kept = run_search(cli, "search", f"conf={conf(tmp_path / 'kept.yaml', '{NCCL_MAX_NCHANNELS: [2]}')}", "--out", str(tmp_path / "kept"))
    assert kept.returncode == 0, kept.stdout + kept.stderr
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "tuner.csv").write_text("allreduce,0,65536,tree,simple,4,1,1,-1,-1\n")  # a user's own file
    said = {}
    for where in (dest, tmp_path / "mine"):
        again = export(cli, tmp_path / "kept", where)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "keep the default" in again.stdout and "export " not in (where / "best.sh").read_text()
        said[where] = again.stdout
    assert sorted(p.name for p in dest.iterdir()) == ["best.sh"], said[dest]
    assert f"removed {dest / 'tuner.csv'}: an earlier export's" in said[dest]
    assert (tmp_path / "mine" / "tuner.csv").read_text().startswith("allreduce,0,65536,tree")  # not ours: kept, and said
    assert f"left {tmp_path / 'mine' / 'tuner.csv'} as it was" in said[tmp_path / "mine"]


def test_a_budget_that_closes_before_the_first_trial_is_inconclusive(cli, tmp_path):
    done = run_search(cli, "search", f"conf={conf(tmp_path / 'nobudget.yaml', '{NCCL_ALGO: [Ring, Tree]}')}",
                      "search.budget_s=0.001", "search.baseline=false", "--out", str(tmp_path / "run"))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "holds no finished trial" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_study_resumed_on_other_grids_is_refused_before_any_trial(cli, tmp_path):
    path = conf(tmp_path / "grids.yaml", "{NCCL_ALGO: [Ring, Tree]}", "confirm_top_k: 0", "baseline: false")
    first = run_search(cli, "search", f"conf={path}", "--trials", "1", "--out", str(tmp_path / "run"))
    assert first.returncode == 0, first.stdout + first.stderr
    # its 1x2 trials would be ranked against the 1x1 one, and the winner confirmed on 1x2 under a '1x1' report
    again = run_search(cli, "search", f"conf={path}", "grids=[1x2]", "--trials", "2", "--out", str(tmp_path / "run"))
    assert again.returncode == 2, again.stdout + again.stderr
    assert "grids: ['1x2'] given, but study 'grids' was created with grids ['1x1']" in again.stderr, again.stderr
    assert len(load(tmp_path / "run", "grids").trials) == 1


def test_the_printed_export_line_runs_as_pasted_for_a_run_directory_with_a_space(cli, tmp_path):
    path = conf(tmp_path / "pasted.yaml", "{NCCL_ALGO: [Ring, Tree]}", "confirm_top_k: 0", "baseline: false")
    done = run_search(cli, "search", f"conf={path}", "--out", str(tmp_path / "run 'a' dir"))
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(l for l in done.stdout.splitlines() if l.startswith("export: "))[len("export: "):]
    pasted = subprocess.run(["bash", "-c", line.replace("envmatrix", f"{sys.executable} -m envmatrix", 1)],
                            cwd=cli.cwd, env=cli.env, capture_output=True, text=True, timeout=120)
    assert pasted.returncode == 0, line + pasted.stdout + pasted.stderr
    assert (tmp_path / "run 'a' dir" / "export" / "best.sh").read_text().count("export NCCL_ALGO=Ring") == 1
