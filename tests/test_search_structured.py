"""The structured sampler's plan (pure) and the winner confirmation (pure), no processes."""

import itertools
import math

import optuna
import pytest

from envmatrix.catalog import load_catalog
from envmatrix.search.confirm import DEFAULT, confirm, decide, needs_more, rounds, summarize, to_json
from envmatrix.search.objective import EvalOutcome, Objective
from envmatrix.search.space import parse_search_space
from envmatrix.search.structured import Layout, next_row
from envmatrix.search.study import SearchSettings, make_sampler, run_search

optuna.logging.set_verbosity(optuna.logging.WARNING)

# ALGO (2 choices), PROTO (3 choices), channels (5 ordered), buffer (4 ordered)
VALUES = (("Ring", "Tree"), ("LL", "LL128", "Simple"), ("2", "4", "8", "16", "32"), ("1048576", "2097152", "4194304", "8388608"))


def test_layout_splits_choices_from_ordered_knobs():
    lay = Layout.of(VALUES + ((None, "1"),) + ((None, "64", "256", "128"),))
    assert lay.ordered == (False, False, True, True, False, True)
    assert lay.order[5] == (1, 3, 2)  # numeric order, not spec order; unset kept apart
    assert lay.anchor == (0, 0, 2, 1, 0, 0)  # middle of an ordered knob, NCCL's default where unset is a value
    assert lay.knob_steps(lay.anchor, 5) == [1, 3, 2]  # from unset every value
    assert lay.knob_steps(tuple(lay.anchor[:5]) + (3,), 5) == [2, 1, 0]  # +-1 in numeric order, then unset
    assert lay.small_choices()


def _walk(lay, table, n, forbidden=lambda r: False):
    measured = {}
    for i in range(n):
        row = next_row(lay, measured, (), forbidden, seed=i)
        if row is None:
            break
        measured[row] = table.get(row)
    return measured


def test_screens_every_choice_first_then_descends_the_best_choice():
    lay = Layout.of(VALUES)
    # best protocol depends on the algorithm; best channels on the protocol: the optimum is far from the anchor
    def f(r):
        a, p, c, b = r
        base = {(0, 0): 0.5, (0, 1): 0.9, (0, 2): 0.7, (1, 0): 0.6, (1, 1): 0.4, (1, 2): 0.8}[(a, p)]
        return base * math.exp(-((c - (4 if p == 1 else 0)) / 2) ** 2) * math.exp(-((b - 3) / 2) ** 2)

    table = {r: f(r) for r in itertools.product(*(range(len(v)) for v in VALUES))}
    measured = _walk(lay, table, 24)  # a fifth of the 120 configs
    first6 = list(measured)[:6]
    assert sorted((r[0], r[1]) for r in first6) == sorted(itertools.product(range(2), range(3)))
    assert all(r[2:] == lay.anchor[2:] for r in first6)
    assert max(measured.values()) == max(table.values())


def test_diagonal_ridge_is_climbed():
    lay = Layout.of((("1", "2", "4", "8", "16"), ("1", "2", "4", "8", "16")))
    # channels x threads on a diagonal ridge rising to the corner: every one-knob step from the ridge is downhill
    table = {r: math.exp(-((r[0] - r[1]) / 0.4) ** 2) * (1 + 0.1 * sum(r)) for r in itertools.product(range(5), range(5))}
    measured = _walk(lay, table, 11)  # anchor, 4 one-knob steps, (3,3), 4 steps, (4,4)
    assert max(measured, key=measured.get) == (4, 4)


def test_forbidden_rows_never_proposed_and_exhaustion_ends():
    lay = Layout.of(VALUES[:2])
    forbidden = lambda r: r == (1, 1)  # noqa: E731
    measured = _walk(lay, {r: 1.0 for r in itertools.product(range(2), range(3))}, 10, forbidden)
    assert (1, 1) not in measured and len(measured) == 5
    assert next_row(lay, measured, (), forbidden) is None


def test_many_choices_use_coordinate_descent_toggles_first():
    lay = Layout.of(((None, "ring", "tree"), (None, "LL", "Simple"), (None, "4"), (None, "4")))
    assert not lay.small_choices()  # 36 choices: screening them all is the whole space
    table = {r: 5.0 + 13.0 * (r[2] == 1) + 2.0 * (r[2] == 1 and r[3] == 1) for r in itertools.product(range(3), range(3), range(2), range(2))}
    measured = _walk(lay, table, 5)
    assert list(measured)[:3] == [(0, 0, 0, 0), (0, 0, 1, 0), (0, 0, 1, 1)]  # anchor, then the 2-valued toggles
    assert max(measured.values()) == 20.0


def test_sampler_drives_run_search_and_resumes_from_the_study():
    space = parse_search_space({"space": {"NCCL_ALGO": ["Ring", "Tree"], "NCCL_PROTO": ["LL", "Simple"],
                                          "NCCL_MIN_NCHANNELS": [2, 4, 8, 16]}}, load_catalog(), {}, "t: search")
    truth = lambda p: (2 if p["NCCL_PROTO"] == "Simple" else 1) * int(p["NCCL_MIN_NCHANNELS"]) * (1.1 if p["NCCL_ALGO"] == "Tree" else 1)  # noqa: E731
    seen = []

    def ev(number, setup):
        p = {v: setup.assignments().get(v) for v in space.vars}
        seen.append(space.row_of(p))
        return EvalOutcome([truth(p)])

    s = SearchSettings(trials=6, sampler="structured", seed=0, storage=None, study_name="u", max_failure_rate=1.0,
                       heartbeat_interval_s=5.0, heartbeat_grace_s=60.0, top_k=3, baseline=False, max_forbidden_streak=5)
    study = optuna.create_study(direction="maximize", sampler=make_sampler("structured", 0, 16, space))
    run_search(study, space, [Objective("bw", ("allreduce",), (None,))], ev, s)
    # a second worker on the same study (a fresh sampler object) continues the plan, never repeats a row
    study.sampler = make_sampler("structured", 0, 16, space)
    run_search(study, space, [Objective("bw", ("allreduce",), (None,))], ev, SearchSettings(**{**s.__dict__, "trials": 9}))
    assert len(seen) == len(set(seen)) == 9
    assert study.best_value == pytest.approx(2 * 16 * 1.1)


# ---------------------------------------------------------------- confirmation


def test_rounds_rotate_the_order():
    assert rounds(["a", "b", "c"], 0, 3) == [(0, "a"), (0, "b"), (0, "c"), (1, "b"), (1, "c"), (1, "a"), (2, "c"), (2, "a"), (2, "b")]


def test_separated_winner_and_overlap():
    s = summarize({1: [10.0, 10.2, 9.9], 2: [9.0, 9.1, 8.8], DEFAULT: [5.0, 5.1, 5.0]})
    d = decide(s, has_default=True)
    assert d.winner == 1 and d.separated and not d.keep_default and "trial 1 beats the runner-up, trial 2" in d.reason
    s = summarize({1: [10.0, 8.0, 9.5], 2: [9.0, 9.8, 8.9]})
    d = decide(s, has_default=False)
    assert d.winner == 1 and not d.separated and "does not beat" in d.reason


def test_one_lucky_measurement_loses_to_the_median():
    # trial 7 was the single-measurement winner (a +15% outlier); the repeats show trial 3 is better
    s = summarize({7: [11.5, 9.0, 9.1], 3: [10.0, 10.1, 9.9]})
    assert decide(s, False).winner == 3


def test_keep_the_default_when_nothing_beats_it():
    d = decide(summarize({4: [9.0, 9.2, 9.1], 5: [8.0, 8.0, 8.1], DEFAULT: [9.5, 9.4, 9.6]}), True)
    assert d.keep_default and d.winner == DEFAULT and d.reason.startswith("keep the default")
    # a candidate whose repeats failed never wins, even with a high median
    d = decide(summarize({4: [20.0, None, 20.0], DEFAULT: [9.5, 9.4, 9.6]}), True)
    assert d.keep_default


def test_minimize_objectives_rank_by_lowest():
    d = decide(summarize({1: [50.0, 51.0, 49.0], 2: [40.0, 41.0, 39.0]}, sign=-1.0), False)
    assert d.winner == 2 and d.separated


def test_repeats_scale_with_the_spread():
    calls = []
    noisy = {1: iter([10.0, 8.0, 12.0, 10.5, 10.4, 10.6]), 2: iter([9.5, 11.0, 8.0, 9.0, 9.1, 9.0])}
    steady = {1: iter([10.0] * 6), 2: iter([9.0] * 6)}

    def run(src):
        calls.clear()
        return confirm([1, 2], lambda r, lab: calls.append((r, lab)) or next(src[lab]), repeats=3, max_repeats=6)

    assert run(steady).repeats == 3 and len(calls) == 6
    c = run(noisy)
    assert c.repeats > 3 and len(calls) == 2 * c.repeats
    assert needs_more(summarize({1: [10.0, 8.0, 12.0], 2: [9.5, 11.0, 8.0]}))
    data = to_json(c)
    assert data["ranking"][0]["label"] == c.decision.winner and data["repeats"] == c.repeats


def test_confirm_settings_are_checked_and_structured_is_the_default():
    from envmatrix.errors import ConfigError
    from envmatrix.search.study import parse_settings

    s = parse_settings({}, "c.yaml: search", "n", 0)
    assert (s.sampler, s.confirm_top_k, s.confirm_repeats, s.confirm_max_repeats) == ("structured", 3, 3, 6)
    assert parse_settings({"confirm_repeats": 8}, "w", "n", 0).confirm_max_repeats == 8  # never fewer than the first rounds
    with pytest.raises(ConfigError, match=r"c.yaml: search.confirm_top_k: -1 is out of range; allowed: an integer >= 0"):
        parse_settings({"confirm_top_k": -1}, "c.yaml: search", "n", 0)
    with pytest.raises(ConfigError, match=r"search.confirm_max_repeats: 2 is below confirm_repeats \(4\); allowed: an integer >= confirm_repeats"):
        parse_settings({"confirm_repeats": 4, "confirm_max_repeats": 2}, "c.yaml: search", "n", 0)
    with pytest.raises(ConfigError, match=r"search.max_failure_rate: 1.5 is out of range; allowed: a number from 0 to 1"):
        parse_settings({"max_failure_rate": 1.5}, "c.yaml: search", "n", 0)
    with pytest.raises(ValueError, match="needs the SearchSpace"):
        make_sampler("structured", 0)


def test_huge_space_expands_from_a_sample():
    lay = Layout.of([tuple(str(2 ** i) for i in range(8))] * 6)  # 262,144 configs
    measured = _walk(lay, {}, 3)  # every measurement fails: step 3 only, from a sample
    assert len(measured) == 3 and len(set(measured)) == 3
