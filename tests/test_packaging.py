"""The wheel carries conf/, search_spaces/ and the batch templates, and works from any cwd outside the checkout.

Builds the real wheel (setup.py's bundling step), installs it into a fresh venv in a temp dir and runs the
installed ``envmatrix`` there; deptry checks that every import is declared.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from envmatrix import paths
from envmatrix.errors import ConfigError, require

REPO = Path(__file__).resolve().parents[1]
BUNDLED = {"conf": "*.yaml", "search_spaces": "*.yaml", "launchers": "*.tmpl"}
# One xdist worker builds the wheel and its venv once (module fixtures are per worker).
pytestmark = pytest.mark.xdist_group("packaging")


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["COLUMNS"] = "200"
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    src = tmp_path_factory.mktemp("src") / "envmatrix-src"
    # A copy of the tracked tree, so the build never writes build/ or *.egg-info into the checkout.
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", "__pycache__", "reports", "build", "dist", "*.egg-info", ".venv"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (whl,) = out.glob("envmatrix-*.whl")
    return whl


@pytest.mark.slow
def test_wheel_contains_every_config_catalog_and_template_byte_for_byte(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for folder, pattern in BUNDLED.items():
            files = sorted((REPO / folder).glob(pattern))
            assert files, folder
            for f in files:
                member = f"envmatrix/_bundled/{folder}/{f.name}"
                assert member in names, member
                assert zf.read(member) == f.read_bytes(), member


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> tuple[Path, Path]:
    """(envmatrix executable, a cwd outside the checkout); the venv sees the system torch but its own envmatrix."""
    root = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(root / "v")
    py = root / "v" / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(wheel)],
                          capture_output=True, text=True, timeout=600, env=_clean_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    cwd = root / "elsewhere"
    cwd.mkdir()
    where = subprocess.run([str(py), "-c", "import envmatrix.paths as p; print(p.conf_dir())"], cwd=cwd,
                           capture_output=True, text=True, timeout=120, env=_clean_env())
    assert where.returncode == 0, where.stderr
    assert str(root / "v") in where.stdout and "_bundled" in where.stdout, where.stdout
    return root / "v" / "bin" / "envmatrix", cwd


def _run(installed, *args: str) -> subprocess.CompletedProcess:
    exe, cwd = installed
    return subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=_clean_env())


@pytest.mark.slow
def test_installed_configs_lists_bundled_configs_with_paths_in_the_install(installed):
    proc = _run(installed, "configs", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert set(rows) == {p.stem for p in (REPO / "conf").glob("*.yaml") if p.stem != "config"}
    assert "aws-ofi-nccl" in rows["aws_ofi"]["description"]
    assert all("_bundled/conf" in r["path"] and Path(r["path"]).is_file() for r in rows.values())


@pytest.mark.slow
@pytest.mark.parametrize("argv, expect", [
    (["sweep", "--dry-run"], "_bundled/conf/default.yaml"),
    (["sweep", "conf=aws_ofi", "--dry-run"], "_bundled/conf/aws_ofi.yaml"),
    (["sweep", "conf=aws_ofi.yaml", "--dry-run"], "_bundled/conf/aws_ofi.yaml"),
    (["search", "conf=search_demo", "--dry-run"], "search search_demo: grids 1x2"),
])
def test_installed_dry_runs_from_any_cwd(installed, argv, expect):
    proc = _run(installed, *argv)
    assert proc.returncode == 0, proc.stderr
    assert expect in proc.stdout.replace("\n", ""), proc.stdout[:400]
    assert not list(installed[1].iterdir()), "a dry run wrote into the cwd"


@pytest.mark.slow
def test_installed_user_config_with_defaults_list_outside_the_repo(installed, tmp_path):
    user = tmp_path / "site"
    user.mkdir()
    (user / "mine.yaml").write_text("defaults: [aws_ofi, _self_]\nname: mine\ngrids: [1x2]\n")
    proc = _run(installed, "sweep", f"conf={user / 'mine.yaml'}", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "mine: 4 setups x 1 grids" in proc.stdout


def test_packaged_data_dirs_resolve_to_the_checkout_here():
    assert paths.conf_dir() == REPO / "conf"
    assert paths.search_spaces_dir() == REPO / "search_spaces"
    assert paths.templates_dir() == REPO / "launchers"
    climbing = re.compile(r"parents\[\d+\]|\.parent\.parent")
    assert not [p for p in (REPO / "envmatrix").rglob("*.py") if climbing.search(p.read_text())], "use envmatrix.paths"
    # bench scripts may find their own checkout (recorded results, test data), never packaged data that way
    assert not [p for p in (REPO / "benchmarks").glob("*.py") if re.search(r"(REPO|parent\.parent)\W+\(?\s*[\"']?(conf|search_spaces|launchers)\b", p.read_text())]


def test_deptry_passes_and_catches_an_undeclared_import(tmp_path):
    deptry = shutil.which("deptry") or pytest.skip("deptry not installed (pip install -e '.[dev]')")
    ok = subprocess.run([deptry, "."], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    stripped = tmp_path / "pyproject.toml"
    stripped.write_text("".join(ln for ln in (REPO / "pyproject.toml").read_text().splitlines(True) if '"numpy' not in ln))
    bad = subprocess.run([deptry, ".", "--config", str(stripped)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "numpy" in bad.stdout + bad.stderr


def test_require_names_the_extra_in_one_line():
    assert require("json", "search", "x").dumps([]) == "[]"
    with pytest.raises(ConfigError) as err:
        require("envmatrix_no_such_module", "search", "envmatrix search")
    assert str(err.value) == ("envmatrix search needs envmatrix_no_such_module, which is not installed; "
                              "install envmatrix[search] (pip install 'envmatrix[search]')")


# Runs the CLI with optuna and torch unimportable, as in a base install (no extras).
_NO_EXTRAS = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('optuna', 'torch'):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
from envmatrix.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _no_extras(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", _NO_EXTRAS, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_without_extras_help_and_dry_runs_work_and_search_names_its_extra(tmp_path):
    commands = [ln.split()[0] for ln in _no_extras(tmp_path, "--help").stdout.splitlines() if ln.startswith("    ") and ln.split()]
    assert {"sweep", "bench", "bisect", "search", "export", "configs"} <= set(commands)
    for cmd in commands:
        proc = _no_extras(tmp_path, cmd, "--help")
        assert proc.returncode == 0 and "usage:" in proc.stdout, (cmd, proc.stderr)
    for argv in (["sweep", "--dry-run"], ["sweep", "conf=aws_ofi", "--dry-run"], ["search", "conf=search_demo", "--dry-run"]):
        proc = _no_extras(tmp_path, *argv)
        assert proc.returncode == 0, (argv, proc.stderr)
    for argv in (["search", "conf=search_demo"], ["export", "--out", str(tmp_path)]):
        proc = _no_extras(tmp_path, *argv)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "install envmatrix[search]" in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []
