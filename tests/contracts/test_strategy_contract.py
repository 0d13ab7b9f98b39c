"""The strategy contract, run for every registered kind on the real catalog.

Determinism: the same spec and seed give the same setups in fresh interpreters with different hash seeds.
Coverage: each kind produces what its name promises (every combination, every pair, each var left out, ...).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest

from envmatrix.catalog import default_catalog
from envmatrix.config.resolve import CatalogValues
from envmatrix.strategies import expand_setups, registered_kinds

BASE = {"base": {"NCCL_PROTO": "Simple", "NCCL_ALGO": "Ring", "NCCL_CROSS_NIC": 1}}
TRIO = ["NCCL_PROTO", "NCCL_ALGO", "NCCL_CROSS_NIC"]
FOUR = {"NCCL_PROTO": "all", "NCCL_ALGO": "all", "NCCL_CROSS_NIC": "all", "NCCL_P2P_DISABLE": "all"}


def _values(var):
    return CatalogValues(default_catalog()).values(var)


def _envs(setups):
    return [{a.var: a.value for a in s.atoms} for s in setups]


def _covers_each_left_out(setups):
    full = {k: str(v) for k, v in BASE["base"].items()}
    return all({k: v for k, v in full.items() if k != var} in _envs(setups) for var in TRIO)


def _covers_each_left_in(setups):
    full = {k: str(v) for k, v in BASE["base"].items()}
    return all({var: full[var]} in _envs(setups) for var in TRIO)


def _covers_every_combination(setups):
    seen = {(e.get("NCCL_PROTO"), e.get("NCCL_ALGO")) for e in _envs(setups)}
    return seen == set(itertools.product(_values("NCCL_PROTO"), _values("NCCL_ALGO"))) and len(setups) == len(seen)


def _covers_every_pair(setups):
    envs = _envs(setups)
    return all(
        any(e.get(a) == va and e.get(b) == vb for e in envs)
        for a, b in itertools.combinations(FOUR, 2) for va in _values(a) for vb in _values(b)
    )


def _n_distinct_in_domain(setups):
    envs = _envs(setups)
    distinct = {tuple(sorted(e.items())) for e in envs}
    return len(setups) == 5 == len(distinct) and all(e[v] in _values(v) for e in envs for v in FOUR)


def _names_each_setup(setups):
    return [s.name for s in setups] == ["x", "y"] and _envs(setups) == [{"NCCL_ALGO": "Tree"}, {}]


# kind -> (spec, what its output must cover); a new kind adds its line here (or the coverage test below fails)
CONTRACT = {
    "explicit": ({"kind": "explicit", "setups": {"x": {"NCCL_ALGO": "Tree"}, "y": {}}}, _names_each_setup),
    "leave_out": ({"kind": "leave_out", "base": "base", "vars": TRIO}, _covers_each_left_out),
    "leave_in": ({"kind": "leave_in", "base": "base", "vars": TRIO, "sizes": [1]}, _covers_each_left_in),
    "product": ({"kind": "product", "vars": {"NCCL_PROTO": "all", "NCCL_ALGO": "all"}}, _covers_every_combination),
    "pairwise": ({"kind": "pairwise", "vars": FOUR}, _covers_every_pair),
    "random": ({"kind": "random", "vars": FOUR, "n": 5}, _n_distinct_in_domain),
}


def _expand(kind, seed=7):
    spec = CONTRACT[kind][0]
    setups = expand_setups(BASE if "base" in spec else None, [spec], CatalogValues(default_catalog()), seed=seed)
    return [s for s in setups if s.origin == kind] if "base" in spec else setups


EXPAND_ALL = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from test_strategy_contract import CONTRACT, _expand
print(json.dumps({k: [[s.name, [a.to_json() for a in s.atoms]] for s in _expand(k)] for k in CONTRACT}))
"""


@pytest.fixture(scope="module")
def fresh_interpreters():
    """Every kind's setups from two fresh interpreters whose string hashing differs."""
    here = os.path.dirname(os.path.abspath(__file__))
    outs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run([sys.executable, "-c", EXPAND_ALL, here], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        outs.append(json.loads(done.stdout))
    return outs


def test_every_registered_kind_has_a_contract_spec():
    assert set(registered_kinds()) <= set(CONTRACT), f"add a spec and coverage check: {set(registered_kinds()) - set(CONTRACT)}"


@pytest.mark.parametrize("kind", registered_kinds())
def test_deterministic_across_interpreters(kind, fresh_interpreters):
    first, second = fresh_interpreters
    assert first[kind] and first[kind] == second[kind]
    here = [[s.name, [a.to_json() for a in s.atoms]] for s in _expand(kind)]
    assert here == first[kind]


@pytest.mark.parametrize("kind", registered_kinds())
def test_covers_what_the_kind_promises(kind):
    setups = _expand(kind)
    assert setups and CONTRACT[kind][1](setups), [s.name for s in setups]


@pytest.mark.parametrize("kind", registered_kinds())
def test_never_varies_a_safety_pin(kind):
    pins = {"NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"}
    assert not any(a.var in pins for s in _expand(kind) for a in s.atoms)
