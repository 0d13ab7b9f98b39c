"""Rendered output: grid order as given, word-boundary clipping, one atom labelling, ETA in CI logs."""

import io
import time
from types import SimpleNamespace

import pytest
from rich.console import Console

from conftest import write_conf

from envmatrix.cli.common import LineProgress
from envmatrix.env.atoms import Atom, Setup
from envmatrix.planning import Grid, plan_runs
from envmatrix.probes import get_probe
from envmatrix.reporting.console import atom_label, clip_words, eta_suffix, probe_line
from envmatrix.reporting.matrix import build_matrix
from envmatrix.app.sweep import SweepProgress


def test_matrix_rows_follow_the_given_grid_order_not_the_run_order():
    grids = [Grid(2, 2), Grid(1, 2), Grid(2, 1)]
    runs = plan_runs([Setup("a")], grids, get_probe("builtin").spec({"timeout_s": 60}), "gloo", "local")
    assert [r.grid.label for r in runs] != ["2x2", "1x2", "2x1"]  # execution stays cheapest first
    assert build_matrix(runs, [], ["2x2", "1x2", "2x1"]).rows == ["2x2", "1x2", "2x1"]


def test_root_cause_is_never_cut_mid_word():
    line = "init_error: RuntimeError: " + " ".join(f"word{i}" for i in range(60))
    out = clip_words(line, 80)
    assert len(out) <= 80 and out.endswith("…")
    assert out[:-1].split()[-1] in line.split()  # the last shown word is whole
    assert clip_words("short line", 80) == "short line"
    assert clip_words("x" * 200, 50) == "x" * 49 + "…"  # one path-like token: cut, still marked


def _result(passed, line=""):
    return SimpleNamespace(passed=passed, outcome="init_error", root_cause={"line": line})


def test_probe_lines_say_which_were_launched():
    long = "NCCL WARN " + "unhandled system error " * 20
    shown = [probe_line("env 1x2", atom_label(0, Atom("NCCL_ALGO", value="Ring")), _result(False, long)),
             probe_line("env 1x2", atom_label(1, Atom("FI_PROVIDER", value="efa")), _result(True), launched=False)]
    assert shown[0].startswith("[env 1x2] a:NCCL_ALGO=Ring: init_error: NCCL WARN") and shown[0].endswith("…")
    assert shown[1] == "[env 1x2] b:FI_PROVIDER=efa: pass (stored, not launched)"
    assert sum("not launched" not in s for s in shown) == 1
    assert atom_label(27, Atom("X", value="1")) == "B:X=1" and atom_label(60, Atom("X", value="1")) == "x60:X=1"


def test_atom_letters_match_the_bisect_report():
    from envmatrix.bisect.driver import BisectReport
    from envmatrix.reporting.console import atom_letter

    report = BisectReport.__new__(BisectReport)
    report.atoms = [Atom(f"V{i}", value="1") for i in range(60)]
    assert report.labels() == {i: atom_letter(i) for i in range(60)}


def test_plain_progress_lines_carry_an_eta_for_ci_logs():
    buf = io.StringIO()
    listener = LineProgress(Console(file=buf, width=200, force_terminal=False))
    progress = SweepProgress(total=4, started=time.time() - 10)
    listener("start", progress, None)
    progress.done = 2
    listener("result", progress, SimpleNamespace(passed=True, setup_name="a", grid="1x2", outcome="pass", root_cause={}))
    progress.done = 4
    listener("result", progress, SimpleNamespace(passed=False, setup_name="b", grid="2x2", outcome="timeout",
                                                 root_cause={"line": "rank 1 hung " + "in allreduce " * 40}))
    lines = buf.getvalue().splitlines()
    assert lines[1].startswith("[2/4] (a) 1x2 pass ETA ") and lines[1].endswith("s")
    assert lines[2].startswith("[4/4] (b) 2x2 timeout: rank 1 hung") and lines[2].endswith("… done")
    assert eta_suffix(SweepProgress(total=3)) == " ETA ?"


@pytest.mark.slow
def test_sweep_output_in_a_ci_log(cli, tmp_path):
    conf = write_conf(tmp_path / "o.yaml", "backend: gloo\ngrids: [2x1, 1x2]\nsetups: {a: {}}\n"
                      "probe: {timeout_s: 60, collectives: [allreduce]}\n")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))  # stdout is a pipe, as in CI
    assert done.returncode == 0, done.stdout + done.stderr
    progress = [l for l in done.stdout.splitlines() if l.startswith("[")]
    assert len(progress) == 2 and " ETA " in progress[0] and progress[1].endswith(" done")
    md = (tmp_path / "o" / "matrix.md").read_text()
    assert md.index("| 2x1 |") < md.index("| 1x2 |")  # the order given, though 1x2 and 2x1 ran world-size order
