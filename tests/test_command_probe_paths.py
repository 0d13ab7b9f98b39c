"""A command probe given as a relative path (docs/bisect.md: --probe-cmd './check.sh') names the file where envmatrix
was called: ranks start in the run's directory, where the path would name nothing."""

import os

from conftest import write_conf
from envmatrix.probes import get_probe


def test_a_relative_program_path_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = get_probe("command").spec({"command": "./check.sh --fast 'a b'"})
    assert list(spec.params["command"]) == [str(tmp_path / "check.sh"), "--fast", "a b"]
    assert get_probe("command").spec({"command": "all_reduce_perf -b 8"}).params["command"] == "all_reduce_perf -b 8"


def test_a_sweep_runs_a_relative_script_from_any_run_directory(cli, tmp_path):
    script = tmp_path / "check.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    os.chmod(script, 0o755)
    conf = write_conf(tmp_path / "c.yaml", "backend: gloo\ngrids: [1x1]\nsetups: {a: {}}\n"
                      "probe: {name: command, command: ./check.sh}\n")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stdout + done.stderr
