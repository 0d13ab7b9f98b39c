"""`sweep --dry-run --json` names each run's network condition: two runs of one setup and grid under two rates were
told apart only by their run keys (the shaping is applied around the launch, so the launch does not show it)."""

import json

import pytest

pytestmark = pytest.mark.slow


def test_each_run_names_its_condition(cli, tmp_path):
    done = cli.run("sweep", "backend=gloo", "grids=[2x1]", "--network", "b1:rate=1gbit", "--network", "b2:rate=200mbit",
                   "--dry-run", "--json", "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)["runs"]
    assert {(r["setup"], r["network"]["name"], r["network"]["value"]) for r in runs if r["setup"] == "baseline"} == {
        ("baseline", "b1", "rate=1gbit"), ("baseline", "b2", "rate=200mbit")}
    assert not (tmp_path / "o").exists()
    plain = cli.run("sweep", "backend=gloo", "grids=[2x1]", "--dry-run", "--json", "--out", str(tmp_path / "p"))
    assert all("network" not in r for r in json.loads(plain.stdout)["runs"])
