"""The ``scale`` plan (issue 37), pure: failing regions learned and avoided, a three-knob basin found."""

import itertools
import math

import optuna
import pytest

from envmatrix.catalog import load_catalog
from envmatrix.search import scale
from envmatrix.search.objective import EvalOutcome, parse_objectives
from envmatrix.search.space import parse_search_space
from envmatrix.search.structured import Layout
from envmatrix.search.structured import next_row as descent_next_row
from envmatrix.search.study import SearchSettings, make_sampler, run_search
from envmatrix.search.summary import failing_regions

optuna.logging.set_verbosity(optuna.logging.WARNING)

KNOB = ("1", "2", "4", "8", "16", "32")
# a choice (2), then five ordered knobs of six values: 15,552 configs
VALUES = (("Ring", "Tree"), ("LL128", "Simple", "LL"), KNOB, KNOB, KNOB, KNOB, KNOB)
BASIN = {2: 5, 3: 0, 4: 5}  # three knobs far from the broad peak (index 2) on both sides


def fails(r):
    return r[5] >= 4 and r[6] >= 4  # "more than 64 sockets per peer": both socket knobs at 16 or 32


def value(r):
    broad = [0.7, 1.0][r[0]] * [0.8, 1.0, 0.6][r[1]]
    for k in range(2, 7):
        broad *= math.exp(-(((r[k] - 2) / 2.0) ** 2))
    narrow = 1.0 / 0.9 * [0.7, 1.0][r[0]] * [0.8, 1.0, 0.6][r[1]]
    for k in range(2, 7):
        d = abs(r[k] - BASIN[k]) if k in BASIN else None
        narrow *= (1.0 if d == 0 else 0.7 if d == 1 else 0.45) if d is not None else math.exp(-(((r[k] - 2) / 2.0) ** 2))
    return None if fails(r) else max(0.9 * broad, 0.9 * narrow)


TABLE = {r: value(r) for r in itertools.product(*(range(len(v)) for v in VALUES))}
PEAK = max(v for v in TABLE.values() if v is not None)


def walk(plan, n, seed):
    lay = Layout.of(VALUES)
    measured = {}
    for _ in range(n):
        row = plan(lay, measured, (), lambda r: False, seed)
        if row is None:
            break
        measured[row] = TABLE[row]
    return measured


def test_the_basin_needs_three_knobs_at_once():
    broad_top = (1, 1, 2, 2, 2, 2, 2)
    basin = (1, 1, 5, 0, 5, 2, 2)
    assert TABLE[basin] == PEAK and TABLE[broad_top] == pytest.approx(0.9 * PEAK, rel=0.01)
    for k, v in BASIN.items():  # one knob at its basin value: downhill from the broad top
        assert TABLE[broad_top[:k] + (v,) + broad_top[k + 1:]] < TABLE[broad_top]
    for (i, v), (j, w) in itertools.combinations(BASIN.items(), 2):  # two knobs: still downhill
        row = list(broad_top)
        row[i], row[j] = v, w
        assert TABLE[tuple(row)] < TABLE[broad_top]


def test_failing_region_is_learned_from_two_failures_and_not_from_one():
    lay = Layout.of(VALUES)
    ok = [(1, 1, 2, 2, 2, 1, 1), (0, 0, 3, 3, 3, 3, 3), (1, 2, 1, 1, 1, 5, 0), (1, 0, 2, 2, 2, 0, 5)]
    one = scale.learn_failures(lay, ok, [(1, 1, 2, 2, 2, 4, 4)])
    assert one.rules == ()  # one failure marks nothing yet
    model = scale.learn_failures(lay, ok, [(1, 1, 2, 2, 2, 4, 4), (0, 2, 3, 1, 1, 5, 4)])
    names = ["ALGO", "PROTO", "C", "B", "T", "SOCKETS", "NSOCKS"]
    assert model.describe(names, VALUES) == ["SOCKETS>=16 and NSOCKS>=16"]
    assert model.predicts((0, 0, 0, 0, 0, 5, 5)) and not model.predicts((0, 0, 0, 0, 0, 3, 5))
    assert all(model.predicts(r) for r in TABLE if TABLE[r] is None)  # the whole refused corner, learned
    assert not any(model.predicts(r) for r in TABLE if TABLE[r] is not None)


def test_a_success_refutes_a_region():
    lay = Layout.of(VALUES)
    failed = [(1, 1, 2, 2, 2, 4, 4), (0, 2, 3, 1, 1, 5, 4)]
    model = scale.learn_failures(lay, [(0, 0, 0, 0, 0, 5, 5)], failed)
    assert not model.predicts((0, 0, 0, 0, 0, 5, 5))  # measured fine: no rule may cover it


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scale_finds_the_narrow_basin_where_the_descent_settles_on_the_broad_one(seed):
    found = walk(scale.next_row, 150, seed)
    good = {r: v for r, v in found.items() if v is not None}
    assert max(good.values()) == PEAK
    descended = walk(descent_next_row, 150, seed)
    assert max(v for v in descended.values() if v is not None) < 0.95 * PEAK


def test_a_learned_failing_region_is_not_proposed_again():
    found = walk(scale.next_row, 150, 0)
    order = list(found)
    refused = [i for i, r in enumerate(order) if found[r] is None]
    assert len(refused) < 10  # ~2.8% of the space fails; random proposals would meet it too, the plan stops
    lay = Layout.of(VALUES)
    model = scale.learn_failures(lay, [r for r in order[: refused[1] + 1] if found[r] is not None],
                                 [order[i] for i in refused[:2]])
    later = [r for r in order[refused[1] + 1:]]
    assert not any(model.predicts(r) for r in later)


def _space():
    space = {"NCCL_ALGO": ["Ring", "Tree"], "NCCL_PROTO": ["LL128", "Simple", "LL"]}
    for var in ("NCCL_MIN_NCHANNELS", "NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD"):
        space[var] = [1, 2, 4, 8, 16]
    space["NCCL_BUFFSIZE"] = [1 << 20, 1 << 21, 1 << 22, 1 << 23, 1 << 24]
    space["NCCL_NTHREADS"] = [64, 128, 256, 512]
    return parse_search_space({"space": space}, load_catalog(), {}, "test: search")


def test_structured_hands_large_spaces_to_the_scale_plan_and_never_exports_a_failure():
    space = _space()
    assert space.size >= scale.SCALE_FROM
    assert type(make_sampler("structured", 0, space.size, space)).__name__ == "ScaleSampler"
    small = parse_search_space({"space": {"NCCL_ALGO": ["Ring", "Tree"], "NCCL_MIN_NCHANNELS": [2, 4, 8]}},
                               load_catalog(), {}, "test: search")
    assert type(make_sampler("structured", 0, small.size, small)).__name__ == "StructuredSampler"

    def evaluate(number, setup):
        env = setup.assignments()
        if int(env["NCCL_SOCKET_NTHREADS"]) * int(env["NCCL_NSOCKS_PERTHREAD"]) > 64:
            return EvalOutcome(None, "nccl_refused", "more than 64 sockets per peer")
        return EvalOutcome([int(env["NCCL_MIN_NCHANNELS"]) * int(env["NCCL_SOCKET_NTHREADS"]) * int(env["NCCL_NSOCKS_PERTHREAD"])])

    study = optuna.create_study(directions=["maximize"], sampler=make_sampler("structured", 0, space.size, space))
    settings = SearchSettings(trials=100, sampler="structured", seed=0, storage=None, study_name="t", max_failure_rate=1.0,
                              heartbeat_interval_s=3600, heartbeat_grace_s=1e9, top_k=3, baseline=False, max_forbidden_streak=100)
    run_search(study, space, parse_objectives(None, "bench", ["1x1"]), evaluate, settings)
    best = study.best_trial
    assert int(best.params["NCCL_SOCKET_NTHREADS"]) * int(best.params["NCCL_NSOCKS_PERTHREAD"]) <= 64
    failed = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL]
    assert 2 <= len(failed) <= 12 and all(t.user_attrs["failure_class"] == "nccl_refused" for t in failed)
    regions = failing_regions(space, study.trials)  # what search.md shows
    assert regions and all("NCCL_SOCKET_NTHREADS" in name and "NCCL_NSOCKS_PERTHREAD" in name for name, _ in regions)
    assert sum(int(n) for _, n in regions) >= 2


def test_budget_s_stops_the_study_before_its_trials():
    space = _space()
    study = optuna.create_study(directions=["maximize"], sampler=make_sampler("random", 0, space.size, space))
    settings = SearchSettings(trials=1000, sampler="random", seed=0, storage=None, study_name="t", max_failure_rate=1.0,
                              heartbeat_interval_s=3600, heartbeat_grace_s=1e9, top_k=3, baseline=False,
                              max_forbidden_streak=100, budget_s=0.3)

    def slow(number, setup):
        import time

        time.sleep(0.05)
        return EvalOutcome([1.0])

    stats = run_search(study, space, parse_objectives(None, "bench", ["1x1"]), slow, settings)
    assert 2 <= stats.told < 20 and stats.stop_reason.startswith("the study's search.budget_s window closed at ")


def test_rank_correlation_is_spearmans_rho_with_ties_at_their_mean_rank():
    from envmatrix.search.fidelity import rank_correlation, ranks

    assert ranks([3.0, 1.0, 1.0, 2.0]) == [4.0, 1.5, 1.5, 3.0]
    assert rank_correlation([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)  # 1 - 6 * 2 / (4 * 15)
    xs, ys = [5.0, 1.0, 1.0, 3.0, 8.0, 2.0], [2.0, 0.5, 0.7, 0.7, 9.0, 1.0]
    # ranks [5, 1.5, 1.5, 4, 6, 3] and [5, 1, 2.5, 2.5, 6, 4]: sum of products of deviations 14.75, each variance sum 17
    assert rank_correlation(xs, ys) == pytest.approx(14.75 / 17)
    assert rank_correlation([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert rank_correlation([1, 1, 1], [1, 2, 3]) == 0.0
    with pytest.raises(ValueError, match="2 and 3"):
        rank_correlation([1, 2], [1, 2, 3])


def test_compare_names_the_full_best_under_the_cheap_ranking_and_the_regret():
    from envmatrix.search.fidelity import compare

    full = {"a": 10.0, "b": 9.0, "c": 5.0, "d": 1.0}
    same = compare({"a": 3.0, "b": 2.0, "c": 1.5, "d": 1.0, "x": 99.0}, full)  # x: measured cheaply only
    assert same.configs == 4 and same.rho == pytest.approx(1.0) and same.best_rank == 1 and same.regret == 0.0
    assert same.predicts
    swapped = compare({"a": 2.0, "b": 3.0, "c": 1.0, "d": 0.5}, full)
    assert swapped.best_rank == 2 and swapped.regret == pytest.approx(0.1) and swapped.rho == pytest.approx(0.8)
    assert swapped.predicts  # 0.8: the threshold itself
    assert not compare({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}, full).predicts


def test_fidelity_of_names_what_the_objective_read():
    from envmatrix.search.fidelity import fidelity_of

    rows = [{"collective": c, "size_bytes": s, "busbw_gbps": 1.0, "iters": 20} for c in ("allreduce", "allgather")
            for s in (1 << 20, 1 << 28)]
    both = parse_objectives({"collectives": ["allreduce", "allgather"], "size": "256M"}, "t", ["1x4"])[0]
    assert fidelity_of(both, {"1x4": rows}) == "allreduce@256M x20, allgather@256M x20"
    largest = parse_objectives({"collective": "allreduce"}, "t", ["1x4"])[0]  # size: max
    assert fidelity_of(largest, {"1x4": rows, "2x2": rows}) == "allreduce@256M x20"


@pytest.mark.slow
def test_every_trial_records_its_fidelity_and_search_md_shows_it(cli, tmp_path):
    from optuna.trial import TrialState
    from search_helpers import gloo_bench_search_conf, load, run_search

    conf = gloo_bench_search_conf(tmp_path / "g.yaml", "gloo_fidelity", '  space: {TORCH_DISTRIBUTED_DEBUG: ["OFF", INFO]}\n'
                                  "  confirm_top_k: 0")
    out = tmp_path / "run"
    done = run_search(cli, "search", f"conf={conf}", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    trials = load(out, "gloo_fidelity").get_trials(states=(TrialState.COMPLETE,))
    assert len(trials) == 2 and {t.user_attrs["fidelity"] for t in trials} == {"allreduce@16K x3"}
    md = (out / "search.md").read_text()
    assert "- fidelity: allreduce@16K x3" in md and "| fidelity |" in md


def test_elite_sampling_draws_the_values_the_best_rows_share():
    lay = Layout.of(VALUES)
    spread = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (0, 1), (1, 0)]
    good = {(1, 1, 5, 0, v, w, 2): 1.0 + i for i, (v, w) in enumerate(spread)}  # the 8 best share knobs 2 and 3
    good.update({(0, 0, 2, 2, 2, 1, 1): 0.1, (0, 2, 1, 1, 1, 0, 0): 0.1, (1, 0, 3, 3, 3, 3, 3): 0.1})
    rng = __import__("random").Random(0)
    taken = set(good)
    draws = [scale.elite_sample(lay, good, rng, lambda r: r not in taken) for _ in range(300)]
    assert not taken & set(draws)
    shared = sum(r[2] == 5 and r[3] == 0 for r in draws) / len(draws)
    assert shared > 0.8  # each 8.1 / 8.6 with the pseudo-counts, about 0.89 jointly; uniform: 1 / 36
    assert len({r[4] for r in draws}) == 6  # a knob the elite does not agree on stays free
    assert scale.elite_sample(lay, good, rng, lambda r: False) is None  # nothing fresh: no proposal


def test_climb_steps_come_in_the_order_the_main_effects_rank_them():
    lay = Layout.of(VALUES)
    rows = [(1, 1, 2, 2, 2, 2, 2), (1, 1, 4, 2, 2, 2, 2), (1, 1, 2, 2, 2, 2, 1), (0, 1, 2, 2, 2, 2, 2)]
    good = dict(zip(rows, (1.0, 3.0, 0.5, 1.0)))
    effect = scale.main_effects(rows, good)
    assert effect[(2, 4)] > 0 > effect[(6, 1)]
    order = scale.neighbours(lay, (1, 1, 3, 2, 2, 2, 2), __import__("random").Random(1), effect)
    assert order[0] == (1, 1, 4, 2, 2, 2, 2)  # knob 2 toward the row that measured best
    assert order.index((1, 1, 3, 2, 2, 2, 1)) > len(order) // 2  # toward the worst one: late


def test_later_starts_put_a_row_better_than_its_values_predict_before_broad_rows_of_like_value():
    import random

    lay = Layout.of(VALUES)
    rng = random.Random(0)
    effect = {(k, v): rng.uniform(-0.4, 0.4) for k, n in enumerate(lay.sizes) for v in range(n)}
    rows = list(dict.fromkeys(tuple(rng.randrange(n) for n in lay.sizes) for _ in range(60)))
    good = {r: math.exp(sum(effect[(k, v)] for k, v in enumerate(r))) for r in rows}  # main effects only: broad rows
    by_value = sorted(good, key=lambda r: -good[r])
    odd = by_value[15]  # its value is 1.4x what its values predict (three of them together), yet 5 rows beat it
    good[odd] *= 1.4
    assert sorted(good, key=lambda r: -good[r]).index(odd) == 5
    order = scale.start_order(lay, rows, good)
    assert order[0] == max(good, key=good.get)  # the first climb still starts from the best row
    assert order[1] == odd
    assert sorted(order) == sorted(rows)


def test_a_later_climb_below_the_optimum_steps_only_held_variables_and_never_back_to_the_optimum():
    top, cur, held = (1, 1, 1, 1, 1, 2, 2), (1, 0, 4, 3, 1, 2, 2), {2, 3}  # copying knobs 2 and 3 did not gain
    assert scale._held_step((1, 0, 5, 3, 1, 2, 2), cur, top, held)  # a held knob one step on
    assert not scale._held_step((1, 0, 1, 3, 1, 2, 2), cur, top, held)  # back to the optimum's value: refused
    assert not scale._held_step((1, 1, 4, 3, 1, 2, 2), cur, top, held)  # a variable the copies settled
