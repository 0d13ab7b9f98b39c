"""One exit-code convention, documented in every --help and honoured by sweep end to end."""

import pytest

from conftest import write_conf
from envmatrix.cli import EXIT_CODES, build_parser


def test_every_command_help_documents_the_same_exit_codes():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.choices and "sweep" in a.choices)
    for name in ("sweep", "bench", "bisect", "search"):
        assert EXIT_CODES in sub.choices[name].format_help(), name
    assert EXIT_CODES in parser.format_help()
    for code in ("0 ", "1 ", "2 ", "3 ", "130"):
        assert f"\n  {code}" in EXIT_CODES


@pytest.mark.slow
def test_sweep_exit_codes_end_to_end(cli, tmp_path):
    ok = write_conf(tmp_path / "ok.yaml", "backend: gloo\ngrids: [1x2]\nsetups: {base: {}}\n"
                    "probe: {timeout_s: 60, collectives: [allreduce]}\n")
    bad = write_conf(tmp_path / "bad.yaml", "backend: gloo\ngrids: [1x2]\nsetups:\n  base: {}\n"
                     "  broken: {GLOO_SOCKET_IFNAME: envmx_missing0}\nprobe: {timeout_s: 60, collectives: [allreduce]}\n")
    assert cli.run("sweep", f"conf={ok}", "--out", str(tmp_path / "a")).returncode == 0
    failed = cli.run("sweep", f"conf={bad}", "--out", str(tmp_path / "b"))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    # the old opt-in flag is still accepted and changes nothing
    assert cli.run("sweep", f"conf={bad}", "--out", str(tmp_path / "b"), "--fail-on-failure").returncode == 1
    assert cli.run("sweep", f"conf={ok}", "--dry-run").returncode == 0
    assert cli.run("sweep", "conf=/nonexistent.yaml").returncode == 2


@pytest.mark.slow
def test_sweep_whose_only_non_passing_cells_are_unresolved_exits_3(cli, tmp_path):
    # a command probe exiting 125 (git bisect's "cannot test") is unresolved: inconclusive, not a failure
    conf = write_conf(tmp_path / "u.yaml", "backend: gloo\ngrids: [1x1]\nsetups:\n  ok: {ENVMATRIX_SKIP: '0'}\n"
                      "  skip: {ENVMATRIX_SKIP: '1'}\n"
                      "probe: {name: command, timeout_s: 60, command: [sh, -c, 'exit $((125 * ENVMATRIX_SKIP))']}\n")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "u"), "--allow-unknown-vars")
    assert done.returncode == 3, done.stdout + done.stderr
    # the closing line says what the exit code means: an unresolved run is not counted as a failure
    assert "1 passed, 0 failed, 1 unresolved (inconclusive), 0 not run;" in done.stdout, done.stdout


def test_sweep_exit_code_table():
    from types import SimpleNamespace as R

    from envmatrix.app.sweep import sweep_exit_code

    assert sweep_exit_code([R(outcome="pass")]) == 0
    assert sweep_exit_code([R(outcome="pass"), R(outcome="unresolved")]) == 3
    assert sweep_exit_code([R(outcome="unresolved"), R(outcome="init_error")]) == 1


@pytest.mark.slow
def test_closing_line_counts_this_sweeps_runs_as_its_exit_code_does(cli, tmp_path):
    # a sweep of one setup into a run dir whose store holds another, failing one: the matrix shows both, but the
    # line and the exit code speak of this sweep (it read "1 passed, 1 failed" with exit 0)
    both = write_conf(tmp_path / "both.yaml", "backend: gloo\ngrids: [1x1]\nsetups:\n  ok: {ENVMATRIX_FAIL: '0'}\n"
                      "  bad: {ENVMATRIX_FAIL: '1'}\n"
                      "probe: {name: command, timeout_s: 60, command: [sh, -c, 'exit $ENVMATRIX_FAIL']}\n")
    one = write_conf(tmp_path / "one.yaml", both.read_text().replace("  bad: {ENVMATRIX_FAIL: '1'}\n", ""))
    out = ["--out", str(tmp_path / "o"), "--allow-unknown-vars"]
    assert cli.run("sweep", f"conf={both}", *out).returncode == 1
    done = cli.run("sweep", f"conf={one}", *out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 0 failed, 0 not run (the matrix shows all 2 cells of the store);" in done.stdout, done.stdout
