"""A command opens its store once, builds its launcher once and plans its runs once (app/ owns the lifecycle).

Real gloo runs through the real command line in this process; only counters are wrapped around the one
store class, the one launcher factory and the one planner, so every open, build and plan is seen whoever calls it.
"""

from __future__ import annotations

import json

import pytest

import envmatrix.app.sweep as app_sweep
import envmatrix.launchers as launchers
from conftest import write_conf
from envmatrix.cli import main
from envmatrix.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow


@pytest.fixture
def counts(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    seen = {"store": 0, "launcher": 0, "plan": 0}

    def counting(key, real):
        def wrapper(*args, **kwargs):
            seen[key] += 1
            return real(*args, **kwargs)
        return wrapper

    real_init = SqliteStore.__init__
    monkeypatch.setattr(SqliteStore, "__init__", counting("store", real_init))
    monkeypatch.setattr(launchers, "configure_launcher", counting("launcher", launchers.configure_launcher))
    monkeypatch.setattr(app_sweep, "plan_runs", counting("plan", app_sweep.plan_runs))
    return seen


def test_sweep_opens_store_builds_launcher_and_plans_once(counts, tmp_path, capsys):
    conf = write_conf(tmp_path / "s.yaml", "backend: gloo\ngrids: [1x2]\nprobe: {collectives: [allreduce], timeout_s: 60}\n"
                      "setups: {a: {}, b: {GLOO_SOCKET_IFNAME: lo}}\n")
    assert main(["sweep", f"conf={conf}", "--out", str(tmp_path / "o")]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "2 passed, 0 failed" in out and "html report:" in out and (tmp_path / "o" / "report.html").is_file()
    assert counts == {"store": 1, "launcher": 1, "plan": 1}


def test_bench_opens_store_and_builds_launcher_once(counts, tmp_path, capsys):
    code = main(["bench", "backend=gloo", "--grid", "1x2", "-c", "allreduce", "-b", "8", "-e", "64", "-n", "2", "-w", "1",
                 "--out", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "busbw" in out and "html report:" in out
    assert counts == {"store": 1, "launcher": 1, "plan": 1}


def test_env_bisect_opens_store_and_builds_launcher_once(counts, tmp_path, capsys):
    env_file = tmp_path / "env0.sh"
    env_file.write_text("export NCCL_DEBUG=WARN\nexport GLOO_SOCKET_IFNAME=envmx_missing0\n")
    code = main(["bisect", "backend=gloo", "probe.collectives=[allreduce]", "probe.timeout_s=30", "--grid", "1x2",
                 "--env-file", str(env_file), "--no-repair", "--out", str(tmp_path / "o"), "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert code == 1, out
    (report,) = json.loads((tmp_path / "r.json").read_text())
    assert report["culprits"] == [["GLOO_SOCKET_IFNAME=envmx_missing0"]]
    assert "html report:" in out
    assert counts["store"] == 1 and counts["launcher"] == 1
