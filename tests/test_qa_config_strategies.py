"""QA of how a valid but unusual config becomes setups and runs: every generating strategy checked against an
independent oracle (pair coverage, no duplicates, seeds), `null` in a strategy's values reaching a real rank as an
unset variable, and the dry run's keys and env equal to what a real sweep launches."""

from __future__ import annotations

import itertools
import json
import random
import sys
from pathlib import Path

import pytest

from conftest import REPO, write_conf
from envmatrix.catalog import load_catalog
from envmatrix.config.resolve import CatalogValues
from envmatrix.env.atoms import SET, UNSET
from envmatrix.errors import ConfigError
from envmatrix.strategies import expand_setups

VALUES = CatalogValues(load_catalog())


def env_of(setup) -> dict[str, str | None]:
    """VAR -> the value a row gives it, None for `unset VAR`; a variable the setup leaves alone is absent."""
    out: dict[str, str | None] = {}
    for atom in setup.atoms:
        out[atom.var] = atom.value if atom.op == SET else None if atom.op == UNSET else f"<{atom.op}>"
    return out


def uncovered(setups, space: dict[str, list], strength: int, forbid=()) -> list:
    """t-way value combinations of ``space`` no setup holds, leaving out those a forbid entry inside the combination
    excludes (a wider forbid entry leaves the combination coverable, so it must be covered)."""
    rows = [env_of(s) for s in setups]
    missing = []
    for names in itertools.combinations(space, strength):
        for vals in itertools.product(*(space[n] for n in names)):
            need = dict(zip(names, vals))
            if any(set(f) <= set(names) and all(need[k] == v for k, v in f.items()) for f in forbid):
                continue
            if not any(all(k in r and r[k] == v for k, v in need.items()) for r in rows):
                missing.append(need)
    return missing


def random_space(rng: random.Random, nvars: int) -> dict[str, list]:
    return {f"QA_V{i}": [f"v{j}" for j in range(rng.randint(1, 4))] + ([None] if rng.random() < 0.3 else [])
            for i in range(nvars)}


@pytest.mark.parametrize("case", range(40))
def test_pairwise_covers_every_tuple_once_per_row_and_is_seeded(case):
    rng = random.Random(case)
    space = random_space(rng, rng.randint(1, 12))
    strength = rng.choice([1, 2, 2, 3])
    spec = {"kind": "pairwise", "vars": space, "strength": strength, "seed": rng.randint(0, 9)}
    setups = expand_setups(None, [spec], VALUES)
    assert uncovered(setups, space, strength) == []
    rows = [tuple(sorted(env_of(s).items(), key=lambda kv: kv[0])) for s in setups]
    assert len(set(rows)) == len(rows)
    assert all(len(r) == len(space) for r in rows)  # every varied variable is set or unset in every row
    assert [s.atoms for s in expand_setups(None, [spec], VALUES)] == [s.atoms for s in setups]


def test_pairwise_forbid_holds_and_the_rest_is_covered():
    space = {"QA_A": ["1", "2", "3"], "QA_B": ["x", "y"], "QA_C": ["p", "q", None], "QA_D": ["0", "1"]}
    forbid = [{"QA_A": "1", "QA_B": "x"}, {"QA_C": None, "QA_D": "1"}, {"QA_A": "2", "QA_B": "y", "QA_C": "q"}]
    for seed in range(6):
        setups = expand_setups(None, [{"kind": "pairwise", "vars": space, "forbid": forbid, "seed": seed}], VALUES)
        for row in map(env_of, setups):
            assert not any(all(row[k] == v for k, v in f.items()) for f in forbid), row
        assert uncovered(setups, space, 2, forbid) == []


def test_random_is_distinct_seeded_and_inside_the_product():
    space = {"QA_A": ["1", "2", "3"], "QA_B": ["x", None], "QA_C": ["p", "q"]}
    product = {tuple(sorted(zip(space, vals))) for vals in itertools.product(*space.values())}

    def draw(**kw):
        spec = {"kind": "random", "vars": space, **kw}
        return [tuple(sorted(env_of(s).items())) for s in expand_setups(None, [spec], VALUES, seed=4)]

    got = draw(n=5)
    assert len(got) == len(set(got)) == 5 and set(got) <= product
    assert draw(n=5) == got and draw(n=5, seed=4) == got
    assert any(draw(n=5, seed=s) != got for s in range(5))
    assert set(draw(n=100)) == product  # more than there are: every row once


def test_product_is_the_full_product_on_a_base_with_path_and_unset_atoms():
    base = {"NCCL_ALGO": "Ring", "LD_LIBRARY_PATH": {"prepend": ["/qa/a", "/qa/b"]}, "NCCL_DEBUG": None}
    space = {"NCCL_PROTO": ["LL"], "NCCL_ALGO": ["Ring", "Tree"], "QA_ONE": ["only"]}
    setups = expand_setups({"b": base}, [{"kind": "product", "base": "b", "vars": space}], VALUES)
    generated = [s for s in setups if s.origin == "product"]
    assert len(generated) == 2 and uncovered(generated, space, 3) == []
    for s in generated:  # the base's untouched atoms ride along, path entries in order
        assert [str(a) for a in s.atoms if a.var in ("LD_LIBRARY_PATH", "NCCL_DEBUG")] == \
            [str(a) for a in setups[0].atoms if a.var in ("LD_LIBRARY_PATH", "NCCL_DEBUG")]


def test_null_in_strategy_values_is_an_unset_atom_as_in_setups():
    by_setups = expand_setups({"u": {"NCCL_ALGO": None}}, None, VALUES)[0]
    for kind, extra in (("product", {}), ("pairwise", {}), ("random", {"n": 2})):
        setups = expand_setups(None, [{"kind": kind, "vars": {"NCCL_ALGO": ["Ring", None]}, **extra}], VALUES)
        unset = [s for s in setups if dict(s.meta)["vary"] == "NCCL_ALGO=unset"]
        assert [s.atoms for s in unset] == [by_setups.atoms], kind


@pytest.mark.slow
def test_null_row_unsets_the_callers_value_in_a_real_rank(cli, tmp_path):
    """A row labelled `QA_Y=unset` must not run with the caller's QA_Y (it did: null dropped the variable)."""
    dump = tmp_path / "dump.py"
    dump.write_text("import json, os\n"
                    "open(os.path.join(os.environ['ENVMATRIX_RESULT_DIR'], 'env.' + os.environ['RANK']), 'w')"
                    ".write(json.dumps(dict(os.environ)))\n")
    conf = write_conf(tmp_path / "c.yaml", f"""
name: qa_null
backend: gloo
grids: [1x2]
setups:
  s1: {{LD_LIBRARY_PATH: {{prepend: [/qa/a, /qa/b], append: [/qa/z]}}, QA_GONE: null, QA_X: "0x10"}}
strategies:
  - {{kind: product, base: s1, vars: {{QA_Y: ["on", null]}}}}
probe: {{name: command, command: [{sys.executable}, {dump}], timeout_s: 60}}
""")
    cli.env.update(QA_Y="inherited", QA_GONE="keep", PYTHONPATH=str(REPO))
    cli.env.pop("LD_LIBRARY_PATH", None)
    dry = cli.run("sweep", f"conf={conf}", "--allow-unknown-vars", "--out", str(tmp_path / "o"), "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    planned = {r["run_key"]: r for r in json.loads(dry.stdout)["runs"]}
    done = cli.run("sweep", f"conf={conf}", "--allow-unknown-vars", "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "o" / "results.json").read_text())["results"]
    assert {r["run_key"] for r in results} == set(planned)  # what the dry run printed is what ran
    for result in results:
        plan = planned[result["run_key"]]
        assert plan["setup"] == result["setup"]["name"]
        for proc in plan["processes"]:
            rank = proc["env_set"]["RANK"]
            env = _rank_env(tmp_path / "o", result["run_key"], rank)
            for var, value in proc["env_set"].items():
                if var not in ("MASTER_PORT", "ENVMATRIX_RESULT_DIR"):  # placeholders: a free port, an attempt dir
                    assert env.get(var) == value, (var, result["setup"]["name"])
            for var in proc["env_unset"]:
                assert var not in env, (var, result["setup"]["name"])
    envs = {r["setup"]["name"]: _rank_env(tmp_path / "o", r["run_key"], "0") for r in results}
    assert envs["s1+QA_Y=on"]["QA_Y"] == "on"
    assert "QA_Y" not in envs["s1+QA_Y=unset"]
    assert envs["s1"]["QA_Y"] == "inherited" and "QA_GONE" not in envs["s1"]
    assert envs["s1"]["LD_LIBRARY_PATH"] == "/qa/a:/qa/b:/qa/z"
    again = cli.run("sweep", f"conf={conf}", "--allow-unknown-vars", "--out", str(tmp_path / "o"))
    assert again.returncode == 0 and "3 already in the store" in again.stdout + again.stderr


def _rank_env(out: Path, run_key: str, rank: str) -> dict[str, str]:
    found = sorted(out.glob(f"logs/*_{run_key}/**/env.{rank}"))
    assert found, f"no env dump of rank {rank} of {run_key}"
    return json.loads(found[-1].read_text())


def test_two_unnamed_pairwise_strategies_are_told_to_take_a_prefix():
    """Both made pw00, pw01, ...: the refusal named neither strategy nor the way out (a `name:` prefix)."""
    spec = {"kind": "pairwise", "vars": {"NCCL_ALGO": ["Ring", "Tree"], "NCCL_PROTO": ["LL", "Simple"]}}
    other = {"kind": "pairwise", "vars": {"NCCL_ALGO": ["Ring", "Tree"], "NCCL_BUFFSIZE": ["1024", "2048"]}}
    with pytest.raises(ConfigError, match=r"^c\.yaml: strategies\[1\]: makes setup 'pw00', also made by strategies\[0\] "
                                          r"with a different env; .* \(give this strategy its own prefix, e\.g\. name: s1_\)$"):
        expand_setups(None, [spec, other], VALUES, where="c.yaml")
    with pytest.raises(ConfigError, match=r"^c\.yaml: strategies\[0\]: makes setup 'pw00', also made by setups "):
        expand_setups({"pw00": {"NCCL_ALGO": "Tree"}}, [spec], VALUES, where="c.yaml")
    named = expand_setups(None, [spec, {**other, "name": "s1_"}], VALUES)
    assert len({s.name for s in named}) == len(named) == 8
    same = expand_setups(None, [spec, spec], VALUES)  # the same rows again: dropped as duplicates, no clash
    assert [s.name for s in same] == [s.name for s in expand_setups(None, [spec], VALUES)]


def test_setups_by_grids_by_conditions_plan_unique_stable_keys_grid_major():
    from envmatrix.network.conditions import parse_condition
    from envmatrix.planning import ProbeSpec, parse_grids, plan_runs

    setups = expand_setups({"a": {}, "b": {"NCCL_ALGO": "Ring"}},  # a second written name of b's env is refused
                           [{"kind": "pairwise", "vars": {"NCCL_PROTO": ["LL", None], "QA_V": ["1", "2"]}}], VALUES)
    grids = parse_grids(["2x2", "1x2", "1x1", "2x1", "4x2", "1x4"])
    conditions = (parse_condition("fast", "rate=10gbit", "n"), parse_condition("slow", "delay=5ms", "n"),
                  parse_condition("plain", "default", "n"))
    probe = ProbeSpec.make("builtin", {"timeout_s": 60})
    runs = plan_runs(setups, grids, probe, "gloo", "local", conditions)
    assert len(runs) == len(setups) * len(grids) * len(conditions) and len(setups) == 2 + 4
    assert len({r.key for r in runs}) == len(runs)
    assert [r.grid.label for r in runs[:: len(setups) * 3]] == ["1x1", "1x2", "2x1", "1x4", "2x2", "4x2"]
    again = plan_runs(list(reversed(setups)), list(reversed(grids)), probe, "gloo", "local", conditions)
    assert {(r.setup.name, r.grid, r.network.name): r.key for r in again} == \
        {(r.setup.name, r.grid, r.network.name): r.key for r in runs}
    unshaped = {(r.setup.name, r.grid): r.key for r in plan_runs(setups, grids, probe, "gloo", "local")}
    assert all(unshaped[(r.setup.name, r.grid)] == r.key for r in runs if r.network.name == "plain")
