"""benchmarks/engine_equivalence.py: old/new sweep dirs agree unless an outcome or root cause differs (issue 18)."""
import importlib.util
import json
import pathlib

spec = importlib.util.spec_from_file_location(
    "engine_equivalence", pathlib.Path(__file__).parents[1] / "benchmarks" / "engine_equivalence.py")
equivalence = importlib.util.module_from_spec(spec)
spec.loader.exec_module(equivalence)


def _run_dir(path, outcome, line, duration):
    path.mkdir()
    symbol = "1" if outcome == "pass" else "0"
    result = {"setup": {"name": "bad_if"}, "grid": "1x2", "outcome": outcome, "duration_s": duration,
              "ranks": [{"outcome": outcome, "timings": {"total_s": duration}}] * 2,
              "root_cause": {"rank": 0, "line": line} if line else {}}
    (path / "results.json").write_text(json.dumps({"matrix": {"1x2": {"bad_if": symbol}}, "results": [result]}))
    return str(path)


def test_timings_paths_and_ports_do_not_count(tmp_path, capsys):
    old = _run_dir(tmp_path / "old", "init_error", "connect to 127.0.0.1:29500 failed after 1.5 s in /tmp/a/x", 3.0)
    new = _run_dir(tmp_path / "new", "init_error", "connect to 127.0.0.1:41234 failed after 2.25 s in /tmp/b/y", 9.0)
    assert equivalence.main([old, new]) == 0
    assert "1 cells compared, 0 differ" in capsys.readouterr().out


def test_an_outcome_difference_exits_1_and_is_marked(tmp_path, capsys):
    old = _run_dir(tmp_path / "old", "init_error", "no interface envmatrix_missing0", 3.0)
    new = _run_dir(tmp_path / "new", "timeout", "no interface envmatrix_missing0", 3.0)
    assert equivalence.main([old, new]) == 1
    out = capsys.readouterr().out
    assert "**DIFFERS**" in out and "1 cells compared, 1 differ" in out


def test_a_different_root_cause_line_exits_1(tmp_path):
    old = _run_dir(tmp_path / "old", "init_error", "no interface envmatrix_missing0", 3.0)
    new = _run_dir(tmp_path / "new", "init_error", "Connection refused", 3.0)
    assert equivalence.main([old, new]) == 1
