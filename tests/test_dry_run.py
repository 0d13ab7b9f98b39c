"""--dry-run prints each run's exact launch: golden shell text per launcher, a shlex round trip, and the printed
lines pasted into a real bash (local ranks and the real OpenMPI mpirun) delivering hostile values literally."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import assert_no_processes, write_conf
from envmatrix.launchers import get_launcher
from envmatrix.launchers.render import plan_json, plan_script, process_line
from envmatrix.planning import Grid, plan_runs
from envmatrix.probes import get_probe
from launcher_contract import GOLDEN, INHERITED, REGOLD, WEIRD, WORKDIR, fixed_key, golden_ctx, weird_setup

CASES = [
    ("local", Grid(1, 2), {}),
    ("local", Grid(2, 2), {}),
    ("mpirun", Grid(1, 2), {}),
    ("mpirun", Grid(2, 2), {"hosts": ["node a", "node-b"]}),
    ("mpiexec", Grid(2, 2), {}),
    ("mpiexec", Grid(2, 2), {"flavor": "hydra", "hosts": ["x1001", "x1002"]}),
    ("srun", Grid(2, 2), {}),
    ("torchrun", Grid(2, 2), {}),
]


def _plan(name, grid, opts):
    run = fixed_key(plan_runs([weird_setup()], [grid], get_probe("builtin").spec({"timeout_s": 60}), "gloo", name)[0])
    cls = type(get_launcher(name))
    launcher = cls() if name == "local" else cls(python="/opt/py/bin/python", as_root=False, options=opts or None)
    return launcher.build(run, golden_ctx())


def _case_id(name, grid, opts):
    return "_".join([name, grid.label, *(["hosts"] if "hosts" in opts else []), *([opts["flavor"]] if "flavor" in opts else [])])


@pytest.mark.parametrize("name,grid,opts", CASES, ids=[_case_id(*c) for c in CASES])
def test_dry_run_text_matches_golden(name, grid, opts):
    text = plan_script(_plan(name, grid, opts), INHERITED, WORKDIR) + "\n"
    path = GOLDEN / f"dry_run_{_case_id(name, grid, opts)}.sh"
    if REGOLD or not path.exists():
        path.write_text(text)
        if not REGOLD:
            pytest.fail(f"golden file {path} was missing and has been written; check it in and rerun")
    assert path.read_text() == text, f"{path.name} differs; if intended: ENVMATRIX_REGOLD=1 python -m pytest tests/test_dry_run.py"


@pytest.mark.parametrize("name,grid,opts", CASES, ids=[_case_id(*c) for c in CASES])
def test_every_line_parses_back_to_the_exact_argv_and_env(name, grid, opts):
    plan = _plan(name, grid, opts)
    for spec, record in zip(plan.processes, plan_json(plan, INHERITED, WORKDIR)["processes"]):
        words = shlex.split(process_line(spec, INHERITED))
        assert words[:3] == ["cd", WORKDIR, "&&"]
        words = words[3:]
        if words[0] == "env":
            n = len(record["env_set"])
            assigned = dict(w.split("=", 1) for w in words[1 : 1 + n])
            assert assigned == record["env_set"] and assigned == {k: v for k, v in spec.env.items() if INHERITED.get(k) != v}
            words = words[1 + n :]
        assert words == list(spec.argv)
    if name in ("mpirun", "mpiexec", "srun"):  # launcher flags carry the variables; the hostile value survives inside them
        assert any(WEIRD in a for a in plan.processes[0].argv)
    else:  # local ranks and torchrun agents get them in their env
        assert all(p.env["ENVMATRIX_WEIRD"] == WEIRD for p in plan.processes)


def test_env_removed_by_the_driver_is_unset_in_the_line():
    plan = _plan("local", Grid(1, 2), {})
    base = {**INHERITED, "NCCL_DEBUG": "WARN"}  # the setup unsets NCCL_DEBUG
    words = shlex.split(process_line(plan.processes[0], base))
    assert words[3:6] == ["env", "-u", "NCCL_DEBUG"]


def _conf(tmp_path: Path, launcher: str) -> Path:
    dump = "import json, os; open('seen%s.json' % os.environ['RANK'], 'w').write(json.dumps(dict(os.environ)))"
    return write_conf(tmp_path / "d.yaml", f"""
backend: gloo
launcher: {launcher}
grids: [1x2]
setups:
  weird: {{ENVMATRIX_WEIRD: {json.dumps(WEIRD)}, NCCL_ALGO: Tree}}
probe:
  name: command
  timeout_s: 60
  command: [{sys.executable}, -c, {json.dumps(dump)}]
""")


@pytest.mark.parametrize("launcher", ["local", "mpirun"])
def test_printed_command_pasted_into_bash_delivers_values_literally(cli, tmp_path, launcher):
    if launcher == "mpirun" and shutil.which("mpirun") is None:
        pytest.skip("mpirun is not installed (.ci/run installs openmpi-bin)")
    conf, out = _conf(tmp_path, launcher), tmp_path / "out dir"
    done = cli.run("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars", "--dry-run", "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(done.stdout)["runs"]
    assert not out.exists(), "a dry run writes nothing"
    text = cli.run("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars", "--dry-run", timeout=120)
    assert run["shell"] in text.stdout  # the human output prints the same lines, unwrapped
    pasted = subprocess.run(["bash", "-c", run["shell"]], env=cli.env, capture_output=True, text=True, timeout=120)
    assert pasted.returncode == 0, pasted.stdout + pasted.stderr
    for rank in (0, 1):
        seen = json.loads((Path(run["workdir"]) / f"seen{rank}.json").read_text())
        assert seen["ENVMATRIX_WEIRD"] == WEIRD and seen["NCCL_ALGO"] == "Tree" and seen["WORLD_SIZE"] == "2"
    assert_no_processes(cli.marker)


def test_json_without_dry_run_is_refused(cli, tmp_path):
    done = cli.run("sweep", "--json", "--out", str(tmp_path / "o"), timeout=120)
    assert done.returncode == 2 and "--json: only with --dry-run" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "o").exists()
