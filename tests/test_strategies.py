"""Setup strategies: seed 003's leave-out table, product, pairwise, random, registry."""

from __future__ import annotations

import itertools
import math

import pytest

from envmatrix.env.atoms import PREPEND, SET, UNSET, Atom, Setup
from envmatrix.errors import ConfigError
from envmatrix.strategies import (
    Strategy,
    StrategyContext,
    ValueSource,
    expand_setups,
    register,
    registered_kinds,
)


class FakeValues:
    """A tiny stand-in for the catalog."""

    CATALOG = {
        "NCCL_PROTO": ["LL", "LL128", "Simple"],
        "NCCL_ALGO": ["Ring", "Tree"],
        "NCCL_CROSS_NIC": ["0", "1", "2"],
    }
    PINS = {"NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"}

    def values(self, var: str) -> list[str]:
        if var not in self.CATALOG:
            raise ConfigError(f"catalog: {var} has no enumerable values")
        return list(self.CATALOG[var])

    def is_pinned(self, var: str) -> bool:
        return var in self.PINS


VALUES = FakeValues()

SEED003_ENV = {
    "NCCL_NET_GDR_LEVEL": "PHB",
    "NCCL_CROSS_NIC": 1,
    "NCCL_COLLNET_ENABLE": 1,
    "NCCL_NET": "AWS Libfabric",
    "LD_LIBRARY_PATH": {"prepend": ["/soft/libraries/hwloc/lib/", "/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib"]},
    "FI_CXI_DISABLE_HOST_REGISTER": 1,
    "FI_MR_CACHE_MONITOR": "userfaultfd",
    "FI_CXI_DEFAULT_CQ_SIZE": 131072,
}
A, B, C = "NCCL_NET_GDR_LEVEL", "NCCL_CROSS_NIC", "NCCL_COLLNET_ENABLE"


def expand(strategies, setups=None, **kw):
    return expand_setups({"0": SEED003_ENV} if setups is None else setups, strategies, VALUES, **kw)


def by_name(setups):
    return {s.name: s for s in setups}


def test_fake_is_a_value_source():
    assert isinstance(VALUES, ValueSource)


# -- explicit -------------------------------------------------------------------


def test_explicit_setup_0_is_seed003_nine_exports():
    (s0,) = expand(None)
    assert s0.name == "0" and s0.origin == "explicit"
    assert len(s0.variables) == 8  # nine exports: LD_LIBRARY_PATH is two atoms
    assert len(s0.atoms) == 9
    assert Atom(B, SET, "1") in s0.atoms
    assert Atom("FI_CXI_DEFAULT_CQ_SIZE", SET, "131072") in s0.atoms
    assert [a.value for a in s0.atoms if a.op == PREPEND] == [
        "/soft/libraries/hwloc/lib/",
        "/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib",
    ]


def test_explicit_strategy_equals_top_level_setups():
    top = expand(None)
    via = expand_setups(None, [{"kind": "explicit", "setups": {"0": SEED003_ENV}}], VALUES)
    assert [(s.name, s.atoms) for s in top] == [(s.name, s.atoms) for s in via]


def test_empty_env_is_the_bare_baseline():
    (s,) = expand_setups({"bare": None}, None, VALUES)
    assert s.atoms == ()


# -- leave_out / leave_in -------------------------------------------------------


def test_seed003_leave_out_table():
    setups = expand([{"kind": "leave_out", "base": "0", "vars": [A, B, C]}])
    assert [s.name for s in setups] == ["0", "0-a", "0-b", "0-c", "0-ab", "0-ac", "0-bc"]
    s0 = setups[0]
    removed = {"0-a": {A}, "0-b": {B}, "0-c": {C}, "0-ab": {A, B}, "0-ac": {A, C}, "0-bc": {B, C}}
    got = by_name(setups)
    for name, gone in removed.items():
        s = got[name]
        assert s.origin == "leave_out"
        assert set(s.atoms) == {a for a in s0.atoms if a.var not in gone}
        assert len(s.atoms) == 9 - len(gone)
        # the rest of the env (plugin, FI_*, both LD_LIBRARY_PATH entries) stays
        assert [a for a in s.atoms if a.var == "LD_LIBRARY_PATH"] == [
            a for a in s0.atoms if a.var == "LD_LIBRARY_PATH"
        ]
    assert dict(got["0-bc"].meta)["left_out"] == f"{B},{C}"


def test_leave_out_sizes_labels_and_path_var():
    setups = expand(
        [{"kind": "leave_out", "base": "0", "vars": [A, "LD_LIBRARY_PATH"], "sizes": [2, 1],
          "labels": {A: "gdr", "LD_LIBRARY_PATH": "L"}}]
    )
    names = [s.name for s in setups]
    assert names == ["0", "0-gdr", "0-L", "0-gdrL"]
    assert all(a.var != "LD_LIBRARY_PATH" for a in by_name(setups)["0-L"].atoms)


def test_leave_out_errors():
    with pytest.raises(ConfigError, match=r"^config: strategies\[0\]\.vars\[1\]: NCCL_CROSS_NICK is not set in setup '0' \(did you mean NCCL_CROSS_NIC\?\)"):
        expand([{"kind": "leave_out", "base": "0", "vars": [A, "NCCL_CROSS_NICK"]}])
    with pytest.raises(ConfigError, match=r"^config: strategies\[0\]\.base: unknown setup '1'"):
        expand([{"kind": "leave_out", "base": "1", "vars": [A]}])
    with pytest.raises(ConfigError, match=r"^config: strategies\[0\]: kind leave_out needs `base:`"):
        expand([{"kind": "leave_out", "vars": [A]}])
    with pytest.raises(ConfigError, match=r"^config: strategies\[0\]\.sizes: 3 is not allowed; allowed: integers 1\.\.2"):
        expand([{"kind": "leave_out", "base": "0", "vars": [A, B], "sizes": [3]}])
    with pytest.raises(ConfigError, match=r"^config: strategies\[0\]\.labels: label 'x' is used by both"):
        expand([{"kind": "leave_out", "base": "0", "vars": [A, B], "labels": {A: "x", B: "x"}}])


def test_leave_out_refuses_a_safety_pin():
    setups = {"p": {"NCCL_NVLS_ENABLE": 0, A: "PHB"}}
    with pytest.raises(ConfigError, match=r"NCCL_NVLS_ENABLE is a safety pin and cannot be varied"):
        expand_setups(setups, [{"kind": "leave_out", "base": "p", "vars": ["NCCL_NVLS_ENABLE"]}], VALUES)


def test_leave_in():
    setups = expand([{"kind": "leave_in", "base": "0", "vars": [A, B, C]}])
    got = by_name(setups)
    assert [s.name for s in setups] == ["0", "0+a", "0+b", "0+c", "0+ab", "0+ac", "0+bc"]
    s0 = got["0"]
    common = {a for a in s0.atoms if a.var not in {A, B, C}}
    assert set(got["0+a"].atoms) == common | {Atom(A, SET, "PHB")}
    assert set(got["0+bc"].atoms) == common | {Atom(B, SET, "1"), Atom(C, SET, "1")}
    assert got["0+a"].origin == "leave_in"


def test_leave_in_size_zero_is_none_and_full_size_dedupes_to_base():
    setups = expand([{"kind": "leave_in", "base": "0", "vars": [A, B], "sizes": [0, 2]}])
    assert [s.name for s in setups] == ["0", "0+none"]
    assert set(setups[1].atoms) == {a for a in setups[0].atoms if a.var not in {A, B}}
    assert ("alias", "0+ab") in setups[0].meta


# -- product ----------------------------------------------------------------------


def test_product_count_names_and_replacement():
    setups = expand(
        [{"kind": "product", "base": "0", "vars": {B: [0, 1], "NCCL_ALGO": ["Ring", "Tree", "NVLS"]}}]
    )
    gen = [s for s in setups if s.origin == "product"]
    # (CROSS_NIC=1 x ALGO) are new envs too: base has no NCCL_ALGO
    assert len(gen) == 6
    assert [s.name for s in gen] == [
        f"0+{B}=0,NCCL_ALGO=Ring", f"0+{B}=0,NCCL_ALGO=Tree", f"0+{B}=0,NCCL_ALGO=NVLS",
        f"0+{B}=1,NCCL_ALGO=Ring", f"0+{B}=1,NCCL_ALGO=Tree", f"0+{B}=1,NCCL_ALGO=NVLS",
    ]
    s = gen[0]
    assert Atom(B, SET, "0") in s.atoms and Atom(B, SET, "1") not in s.atoms
    assert [a.var for a in s.atoms].index(B) == [a.var for a in setups[0].atoms].index(B)  # in place
    assert s.atoms[-1] == Atom("NCCL_ALGO", SET, "Ring")  # new vars appended
    assert len(s.atoms) == 10


def test_product_all_values_no_base_and_name_prefix():
    setups = expand_setups(None, [{"kind": "product", "vars": {"NCCL_PROTO": "all"}}], VALUES)
    assert [s.name for s in setups] == ["NCCL_PROTO=LL", "NCCL_PROTO=LL128", "NCCL_PROTO=Simple"]
    assert setups[0].atoms == (Atom("NCCL_PROTO", SET, "LL"),)
    setups = expand_setups(None, [{"kind": "product", "name": "p-", "vars": {"NCCL_ALGO": "all"}}], VALUES)
    assert [s.name for s in setups] == ["p-NCCL_ALGO=Ring", "p-NCCL_ALGO=Tree"]
    with pytest.raises(ConfigError, match=r"strategies\[0\].name='p/': contains a path separator"):  # as setup names
        expand_setups(None, [{"kind": "product", "name": "p/", "vars": {"NCCL_ALGO": "all"}}], VALUES)


def test_product_null_means_unset():
    setups = expand([{"kind": "product", "base": "0", "vars": {A: ["PHB", None], "NCCL_ALGO": [None, "Ring"]}}])
    got = by_name(setups)
    # null is `unset VAR`, as in setups: (the base inherits NCCL_ALGO, so ALGO=unset is not the base)
    assert got[f"0+{A}=PHB,NCCL_ALGO=unset"].atoms == setups[0].atoms + (Atom("NCCL_ALGO", UNSET),)
    s = got[f"0+{A}=unset,NCCL_ALGO=unset"]
    assert Atom(A, UNSET) in s.atoms and Atom("NCCL_ALGO", UNSET) in s.atoms and len(s.atoms) == 10
    assert s.atoms.index(Atom(A, UNSET)) == 0  # in the place of the base's A
    assert dict(s.meta)["vary"] == f"{A}=unset,NCCL_ALGO=unset"
    assert len(setups) == 1 + 4


def test_product_bool_and_int_values_are_strings():
    setups = expand_setups(None, [{"kind": "product", "vars": {B: [True, False, 2]}}], VALUES)
    assert [s.atoms[0].value for s in setups] == ["1", "0", "2"]


def test_product_refuses_pins_and_bad_values():
    with pytest.raises(ConfigError, match=r"^config: strategies\[0\]\.vars\.NCCL_NVLS_ENABLE: NCCL_NVLS_ENABLE is a safety pin and cannot be varied$"):
        expand([{"kind": "product", "vars": {"NCCL_NVLS_ENABLE": [0, 1]}}])
    with pytest.raises(ConfigError, match=r"^config: strategies\[0\]\.vars\.NCCL_PROTO: 'al' is not allowed \(did you mean all\?\)"):
        expand([{"kind": "product", "vars": {"NCCL_PROTO": "al"}}])
    with pytest.raises(ConfigError, match=r"^config: strategies\[0\]\.vars\.FOO: 'all': catalog: FOO has no enumerable values"):
        expand([{"kind": "product", "vars": {"FOO": "all"}}])
    with pytest.raises(ConfigError, match=r"^config: strategies\[0\]\.vars\.FOO\[0\]: \[1\] is not a single value"):
        expand([{"kind": "product", "vars": {"FOO": [[1]]}}])
    with pytest.raises(ConfigError, match=r"^config: strategies\[0\]\.vars: the product has 59049 setups"):
        expand([{"kind": "product", "vars": {f"V{i}": [1, 2, 3] for i in range(10)}}])


# -- pairwise -----------------------------------------------------------------------


def _pairs_of(assign: dict[str, str | None]):
    return {frozenset(p) for p in itertools.combinations(assign.items(), 2)}


def _assignment(setup: Setup, varied: list[str]) -> dict[str, str | None]:
    vals = setup.assignments()
    return {v: vals.get(v) for v in varied}


def test_pairwise_covers_every_pair_with_few_rows():
    varied = {f"V{i}": ["x", "y", "z"] for i in range(10)}
    setups = expand_setups(None, [{"kind": "pairwise", "vars": varied}], VALUES)
    assert 9 <= len(setups) <= 20 < 3**10
    assert [s.name for s in setups[:3]] == ["pw00", "pw01", "pw02"]
    covered = set().union(*(_pairs_of(_assignment(s, list(varied))) for s in setups))
    for (v1, vals1), (v2, vals2) in itertools.combinations(varied.items(), 2):
        for x, y in itertools.product(vals1, vals2):
            assert frozenset({(v1, x), (v2, y)}) in covered


def test_pairwise_forbid_and_null_and_base():
    varied = {
        "NCCL_PROTO": "all",
        "NCCL_ALGO": ["Ring", "Tree", None],
        B: ["0", "1"],
        "NCCL_IB_HCA": ["mlx5_0", "mlx5_1", None],
        "NCCL_SOCKET_IFNAME": ["eth0", "ib0"],
    }
    forbid = [
        {"NCCL_PROTO": "LL128", "NCCL_ALGO": "Tree"},
        {"NCCL_ALGO": None, "NCCL_IB_HCA": None},
        {B: 1, "NCCL_IB_HCA": "mlx5_1", "NCCL_SOCKET_IFNAME": "ib0"},  # 3-way: its pairs stay allowed
    ]
    spec = {"kind": "pairwise", "base": "0", "vars": varied, "forbid": forbid, "seed": 3}
    setups = [s for s in expand([spec]) if s.origin == "pairwise"]
    assert setups[0].name.startswith("0+pw")
    names = list(varied)
    rows = [_assignment(s, names) for s in setups]
    resolved = {k: (VALUES.values(k) if v == "all" else v) for k, v in varied.items()}
    forbidden = [{k: (None if v is None else str(v)) for k, v in f.items()} for f in forbid]
    for row in rows:
        for f in forbidden:
            assert not all(row[k] == v for k, v in f.items()), (row, f)
    covered = set().union(*(_pairs_of(r) for r in rows))
    allowed_rows = [dict(zip(names, combo)) for combo in itertools.product(*resolved.values())]
    allowed_rows = [r for r in allowed_rows if not any(all(r[k] == v for k, v in f.items()) for f in forbidden)]
    must = set().union(*(_pairs_of(r) for r in allowed_rows))
    assert must <= covered
    assert frozenset({(B, "1"), ("NCCL_IB_HCA", "mlx5_1")}) in covered
    assert len(rows) < len(allowed_rows)
    # the base's untouched vars ride along
    assert all(Atom("NCCL_NET", SET, "AWS Libfabric") in s.atoms for s in setups)


def test_pairwise_is_deterministic_and_seeded():
    varied = {f"V{i}": ["a", "b", "c", "d"] for i in range(6)}

    def run(**kw):
        return [s.atoms for s in expand_setups(None, [{"kind": "pairwise", "vars": varied, **kw}], VALUES, seed=5)]

    assert run() == run()
    assert run(seed=5) == run()
    assert any(run(seed=s) != run() for s in (1, 2, 3))


def test_pairwise_strength_three_and_tiny_spaces():
    varied = {f"V{i}": ["0", "1"] for i in range(5)}
    setups = expand_setups(None, [{"kind": "pairwise", "vars": varied, "strength": 3}], VALUES)
    covered = set()
    for s in setups:
        a = _assignment(s, list(varied))
        covered |= {frozenset(c) for c in itertools.combinations(a.items(), 3)}
    assert len(covered) == math.comb(5, 3) * 8
    assert len(setups) < 32
    # strength above the number of vars: the full product (covertable alone yields nothing)
    one = expand_setups(None, [{"kind": "pairwise", "vars": {"NCCL_ALGO": "all"}}], VALUES)
    assert [s.name for s in one] == ["pw00", "pw01"]


def test_pairwise_errors():
    with pytest.raises(ConfigError, match=r"^config: strategies\[0\]\.forbid\[0\]\.NCCL_ALGO: 'Tre' is not among the values of NCCL_ALGO; allowed: 'Ring', 'Tree'$"):
        expand([{"kind": "pairwise", "vars": {"NCCL_ALGO": "all", B: [0, 1]}, "forbid": [{"NCCL_ALGO": "Tre"}]}])
    with pytest.raises(ConfigError, match=r"^config: strategies\[0\]\.forbid\[0\]\.NCCL_PROTOO: not one of the varied variables \(did you mean NCCL_PROTO\?\)"):
        expand([{"kind": "pairwise", "vars": {"NCCL_PROTO": "all", B: [0, 1]}, "forbid": [{"NCCL_PROTOO": "LL"}]}])
    with pytest.raises(ConfigError, match=r"^config: strategies\[0\]\.strength: 0 is not allowed"):
        expand([{"kind": "pairwise", "vars": {"NCCL_PROTO": "all"}, "strength": 0}])
    with pytest.raises(ConfigError, match=r"safety pin"):
        expand([{"kind": "pairwise", "vars": {"NCCL_PROTO": "all", "NVSHMEM_DISABLE_NVLS": [0, 1]}}])
    with pytest.raises(ConfigError, match=r"^config: strategies\[0\]\.forbid: every combination is forbidden"):
        expand([{"kind": "pairwise", "vars": {"NCCL_ALGO": "all"}, "forbid": [{"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Tree"}]}])


# -- random ---------------------------------------------------------------------------


def test_random_is_deterministic_distinct_and_respects_forbid():
    varied = {"NCCL_PROTO": "all", "NCCL_ALGO": "all", B: "all", "X": [1, 2, 3, 4]}
    forbid = [{"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}]

    def run(**kw):
        spec = {"kind": "random", "vars": varied, "n": 10, "forbid": forbid, **kw}
        return expand_setups(None, [spec], VALUES)

    a, b = run(), run()
    assert [s.atoms for s in a] == [s.atoms for s in b]
    assert [s.name for s in a] == [f"rnd{i:02d}" for i in range(10)]
    assert len({s.atoms for s in a}) == 10
    for s in a:
        v = s.assignments()
        assert not (v["NCCL_PROTO"] == "LL" and v["NCCL_ALGO"] == "Ring")
    assert [s.atoms for s in run(seed=0)] == [s.atoms for s in a]  # ctx.seed defaults to 0
    assert any([s.atoms for s in run(seed=k)] != [s.atoms for s in a] for k in (1, 2, 3))


def test_random_seed_falls_back_to_run_seed():
    varied = {f"V{i}": ["a", "b", "c"] for i in range(4)}
    spec = {"kind": "random", "vars": varied, "n": 5}
    x = expand_setups(None, [spec], VALUES, seed=9)
    y = expand_setups(None, [dict(spec, seed=9)], VALUES, seed=0)
    assert [s.atoms for s in x] == [s.atoms for s in y]


def test_random_n_larger_than_space_gives_all():
    spec = {"kind": "random", "vars": {"NCCL_ALGO": "all", B: [0, 1]}, "n": 50,
            "forbid": [{"NCCL_ALGO": "Tree", B: 1}]}
    setups = expand_setups(None, [spec], VALUES)
    assert len(setups) == 3


def test_random_large_space_sampling():
    varied = {f"V{i}": [str(j) for j in range(6)] for i in range(10)}  # 60M rows
    spec = {"kind": "random", "vars": varied, "n": 25, "forbid": [{"V0": "0"}]}
    setups = expand_setups(None, [spec], VALUES)
    assert len({s.atoms for s in setups}) == 25
    assert all(s.assignments()["V0"] != "0" for s in setups)


# -- expand_setups, registry -----------------------------------------------------------


def test_unknown_kind_did_you_mean():
    with pytest.raises(ConfigError) as e:
        expand([{"kind": "leave-out", "base": "0", "vars": [A]}])
    assert str(e.value) == (
        "config: strategies[0]: unknown strategy kind 'leave-out' (did you mean leave_out?); "
        "allowed: explicit, leave_in, leave_out, pairwise, product, random"
    )
    with pytest.raises(ConfigError, match=r"^x\.yaml: strategies\[1\]: missing `kind:`"):
        expand_setups({"0": {}}, [{"kind": "explicit", "setups": {"1": {A: 1}}}, {"base": "0"}], VALUES, where="x.yaml")


def test_unknown_key_names_key_and_allowed():
    with pytest.raises(ConfigError) as e:
        expand([{"kind": "leave_out", "base": "0", "vars": [A], "size": [1]}])
    msg = str(e.value)
    assert msg.startswith("config: strategies[0]: unknown key 'size'")
    assert "(did you mean sizes?)" in msg and "allowed: base, kind, labels, sizes, vars" in msg
    assert "\n" not in msg


def test_all_errors_are_one_line_and_prefixed():
    bad = [
        {"kind": "product"},
        {"kind": "product", "vars": []},
        {"kind": "random", "vars": {"NCCL_ALGO": "all"}},
        {"kind": "random", "vars": {"NCCL_ALGO": "all"}, "n": 0},
        {"kind": "leave_in", "base": "0", "vars": "NCCL_ALGO"},
        {"kind": "explicit", "setups": {"z": {A: [1, 2]}}},
        {"kind": "explicit", "setups": ["z"]},
        "leave_out",
    ]
    for i, spec in enumerate(bad):
        with pytest.raises(ConfigError) as e:
            expand([{"kind": "explicit", "setups": {"ok": {}}}, spec])
        assert str(e.value).startswith("config: strategies[1]"), str(e.value)
        assert "\n" not in str(e.value)


def test_base_may_name_an_earlier_strategy_output():
    setups = expand(
        [
            {"kind": "leave_out", "base": "0", "vars": [A, B, C], "sizes": [1]},
            {"kind": "product", "base": "0-a", "vars": {"NCCL_ALGO": ["Ring"]}},
        ]
    )
    assert setups[-1].name == "0-a+NCCL_ALGO=Ring"


def test_dedupe_keeps_first_name():
    # a generated setup's env met again under a written name: one run, under the first name, the second an alias
    setups = expand(
        [
            {"kind": "leave_out", "base": "0", "vars": [A, B]},
            {"kind": "explicit", "setups": {"no-gdr": {k: v for k, v in SEED003_ENV.items() if k != A}}},
        ]
    )
    assert [s.name for s in setups] == ["0", "0-a", "0-b"]
    assert ("alias", "no-gdr") in setups[1].meta


def test_two_written_setups_of_one_env_are_refused():
    # the second name would have no run of its own (a run is keyed on its env): it vanished from every table
    with pytest.raises(ConfigError, match=r"strategies\[0\]\.setups\.same-as-0: the same env as setups\.0 "):
        expand([{"kind": "explicit", "setups": {"same-as-0": dict(reversed(list(SEED003_ENV.items())))}}])


def test_path_order_matters_for_dedupe():
    env = {"LD_LIBRARY_PATH": {"prepend": ["/a", "/b"]}}
    flipped = {"LD_LIBRARY_PATH": {"prepend": ["/b", "/a"]}}
    assert len(expand_setups({"x": env, "y": flipped}, None, VALUES)) == 2


def test_name_clash_is_refused():
    with pytest.raises(ConfigError, match=r"^config: strategies\[1\]: makes setup '0-a', also made by strategies\[0\] "
                                          r"with a different env; setup names must be unique \(rename the other setup\)$"):
        expand([{"kind": "explicit", "setups": {"0-a": {"X": 1}}}, {"kind": "leave_out", "base": "0", "vars": [A, B]}])


def test_empty_is_an_error():
    for explicit, strategies in [(None, None), ({}, []), (None, [])]:
        with pytest.raises(ConfigError, match=r"^cfg: no setups: give `setups:` or `strategies:`$"):
            expand_setups(explicit, strategies, VALUES, where="cfg")


def test_registered_kinds():
    # duplicate and unknown-kind behaviour: tests/contracts/test_registry_contract.py
    assert registered_kinds() == ["explicit", "leave_in", "leave_out", "pairwise", "product", "random"]


def test_a_new_kind_can_be_registered_and_used():
    from envmatrix.strategies import base

    @register
    class Baseline(Strategy):
        kind = "test_baseline"

        def generate(self, spec, ctx: StrategyContext):
            self.check_spec(spec, ctx.where)
            return [Setup(name="bare", origin=self.kind)]

    try:
        setups = expand_setups(None, [{"kind": "test_baseline"}], VALUES)
        assert [s.name for s in setups] == ["bare"]
    finally:
        base._REGISTRY.remove("test_baseline")


def test_pairwise_fills_pairs_covertable_left_out(monkeypatch):
    """covertable's make() does not raise on uncovered pairs; we check and complete."""
    import covertable

    real = covertable.make
    monkeypatch.setattr(covertable, "make", lambda *a, **k: real(*a, **k)[:2])
    varied = {f"V{i}": ["x", "y", "z"] for i in range(5)}
    forbid = [{"V0": "x", "V1": "y"}]
    setups = expand_setups(None, [{"kind": "pairwise", "vars": varied, "forbid": forbid}], VALUES)
    rows = [_assignment(s, list(varied)) for s in setups]
    assert not any(r["V0"] == "x" and r["V1"] == "y" for r in rows)
    covered = set().union(*(_pairs_of(r) for r in rows))
    for (v1, vals1), (v2, vals2) in itertools.combinations(varied.items(), 2):
        for x, y in itertools.product(vals1, vals2):
            if {v1: x, v2: y} != {"V0": "x", "V1": "y"}:
                assert frozenset({(v1, x), (v2, y)}) in covered
