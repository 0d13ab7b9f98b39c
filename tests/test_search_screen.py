"""search.screen (cheap fidelity first): parsing, the pure decisions, the ask/tell loop with a screen, and a real search."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from envmatrix.errors import ConfigError
from envmatrix.search.export import ranked
from envmatrix.search.objective import EvalOutcome, parse_objectives
from envmatrix.search.screen import (SCREEN_ATTR, SCREENED, CostCheck, Screen, cheap_bench, cheap_objective, estimate,
                                     goes_on, parse_screen)
from envmatrix.search.space import parse_search_space
from envmatrix.search.study import BASELINE_ATTR, SearchSettings, counts_toward_budget, make_sampler, run_search
from envmatrix.catalog import load_catalog

optuna.logging.set_verbosity(optuna.logging.WARNING)
BENCH = {"sizes": [1 << 10, 1 << 20, 1 << 24, 1 << 28], "iters": 20, "warmup": 5, "max_bytes": 1 << 28}


@pytest.mark.parametrize("raw, objectives, baseline, bench, says", [
    ({"max_byte": "16M"}, 1, True, BENCH, "unknown key 'max_byte'"),
    ({"max_bytes": "16M"}, 2, True, BENCH, "got 2 objectives"),
    ({"max_bytes": "16M"}, 1, False, BENCH, "needs search.baseline: true"),
    ({"max_bytes": "16M"}, 1, True, None, "the probe has no bench"),
    ({"max_bytes": "256M"}, 1, True, BENCH, "make no cheaper bench"),
    ({"iters": 20}, 1, True, BENCH, "make no cheaper bench"),
    ({"max_bytes": "512"}, 1, True, BENCH, "is below every size probe.bench measures"),
    ({"max_bytes": "16M", "keep": 0}, 1, True, BENCH, "keep: 0"),
    ({"max_bytes": "16M", "keep": 1.5}, 1, True, BENCH, "keep: 1.5"),
    ({"max_bytes": "16M", "pays_below": "x"}, 1, True, BENCH, "pays_below"),
    ({"iters": 0}, 1, True, BENCH, "iters: 0"),
    ("16M", 1, True, BENCH, "is not a mapping"),
])
def test_a_screen_that_cannot_run_is_refused_in_one_line_naming_the_key(raw, objectives, baseline, bench, says):
    with pytest.raises(ConfigError) as err:
        parse_screen(raw, "c.yaml: search.screen", objectives, baseline, bench)
    text = str(err.value)
    assert says in text and "search.screen" in text and "allowed" in text and "\n" not in text


def test_the_cheap_bench_keeps_the_sizes_up_to_max_bytes_and_takes_its_iterations():
    screen = parse_screen({"max_bytes": "16M", "iters": 5}, "s", 1, True, BENCH)
    assert screen == Screen(1 << 24, 5, 0.7, 0.6)
    cheap = cheap_bench(BENCH, screen)
    assert cheap["sizes"] == [1 << 10, 1 << 20, 1 << 24] and cheap["max_bytes"] == 1 << 24 and cheap["iters"] == 5
    assert BENCH["iters"] == 20 and len(BENCH["sizes"]) == 4  # the full bench is left as it was
    (full,) = parse_objectives({"collectives": ["allreduce", "allgather"], "size": "256M",
                                "weights": {"allreduce": 2, "allgather@256M": 3}}, "o", ["1x2"])
    low = cheap_objective(full)
    assert low.sizes == (None,) and low.collectives == full.collectives and dict(low.weights) == {"allreduce": 2.0}


def test_a_trial_goes_on_at_keep_of_the_best_cheap_value_in_either_direction():
    assert goes_on(8.0, 10.0, 0.8, "maximize") and not goes_on(7.9, 10.0, 0.8, "maximize")
    assert goes_on(125.0, 100.0, 0.8, "minimize") and not goes_on(126.0, 100.0, 0.8, "minimize")  # time: 100/125 = 0.8
    assert goes_on(1.0, None, 0.8, "maximize")  # nothing to compare with yet
    assert estimate(2.0, [(1.0, 3.0), (2.0, 4.0), (4.0, 12.0)]) == pytest.approx(2.0 * 3.0)  # median of 3, 2, 3
    assert estimate(2.0, []) == 2.0


def test_the_screen_stays_on_only_while_it_buys_trials():
    from envmatrix.search.screen import MIN_DECISIONS, still_pays

    assert still_pays(0.25, 19, 0)  # too few verdicts to judge
    assert still_pays(0.25, 3, MIN_DECISIONS - 3)  # 0.25 + 0.15 of a full probe a trial: 2.5x the trials
    assert not still_pays(0.25, 12, 8)  # 0.25 + 0.6: 1.18x, under the 1.5x it must buy
    assert not still_pays(0.5, 4, 16)  # 0.5 + 0.2: 1.43x


def test_the_cost_check_screens_only_below_pays_below():
    assert CostCheck(1.0, 4.0, 0.6).on and CostCheck(1.0, 4.0, 0.6).ratio == 0.25
    off = CostCheck(0.9, 1.0, 0.6)
    assert not off.on and "screen off" in off.line() and "0.90 of a full one" in off.line()
    assert CostCheck.from_json(off.to_json()) == off


# ---------------------------------------------------------------- the loop, on a landscape known in advance

SPACE = {"NCCL_ALGO": ["Ring", "Tree"], "NCCL_MIN_NCHANNELS": [1, 2, 4, 8, 16], "NCCL_BUFFSIZE": [1 << 20, 1 << 21, 1 << 22, 1 << 23]}


def full_value(env) -> float:
    ch, buf = int(env["NCCL_MIN_NCHANNELS"]), int(env["NCCL_BUFFSIZE"])
    return (10.0 if env["NCCL_ALGO"] == "Ring" else 4.0) * min(ch, 8) / (1 + abs(buf - (1 << 22)) / (1 << 22))


class Landscape:
    """A full and a cheap evaluator (the cheap value half the full one, so it ranks exactly as the full)."""

    def __init__(self, fail=lambda env: False):
        self.full_calls, self.cheap_calls, self.fail = [], [], fail

    def __call__(self, number, setup):
        env = setup.assignments()
        self.full_calls.append(number)
        return EvalOutcome([full_value(env)], attrs={"fidelity": "allreduce@256M x20"})

    def cheap(self, number, setup):
        env = setup.assignments()
        self.cheap_calls.append(number)
        if self.fail(env):
            return EvalOutcome(None, "nccl_refused", "NCCL WARN refused", {"fidelity": "allreduce@16M x5"})
        return EvalOutcome([0.5 * full_value(env)], attrs={"fidelity": "allreduce@16M x5"})


def searched(check: CostCheck, trials: int = 25, fail=lambda env: False, keep: float = 0.8):
    space = parse_search_space({"space": SPACE}, load_catalog(), {}, "test: search")
    study = optuna.create_study(directions=["maximize"], sampler=make_sampler("structured", 0, space.size, space))
    study.set_user_attr(BASELINE_ATTR, {"values": [1.0], "failed": False, SCREEN_ATTR: check.to_json()})
    settings = SearchSettings(trials=trials, sampler="structured", seed=0, storage=None, study_name="t", max_failure_rate=1.0,
                              heartbeat_interval_s=3600, heartbeat_grace_s=1e9, top_k=3, baseline=True,
                              max_forbidden_streak=100, screen=Screen(1 << 24, 5, keep, 0.6))
    land = Landscape(fail)
    stats = run_search(study, space, parse_objectives(None, "o", ["1x1"]), land, settings)
    return study, land, stats


def test_screened_trials_stop_at_the_cheap_fidelity_count_toward_trials_and_are_never_ranked():
    study, land, stats = searched(CostCheck(0.2, 1.0, 0.6, cheap_value=0.5, full_value=1.0))
    trials = study.get_trials()
    screened = [t for t in trials if t.user_attrs.get(SCREENED)]
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert screened and complete and stats.screened == len(screened)
    assert all(t.state == TrialState.PRUNED for t in screened)
    assert sum(counts_toward_budget(t) for t in trials) == 25  # the trials budget holds the screened ones
    assert len(land.cheap_calls) == 25 and sorted(land.full_calls) == sorted(t.number for t in complete)
    rows = [tuple(sorted(t.params.items())) for t in trials]
    assert len(set(rows)) == len(rows)  # a screened row is a measured row: the plan does not propose it again
    # every stop was below keep x the best cheap value measured before it, every full trial at or above it
    best = 0.5  # the default env's cheap value
    for t in sorted(trials, key=lambda t: t.number):
        cheap = t.user_attrs[SCREEN_ATTR]["value"]
        assert (cheap < 0.8 * best) == bool(t.user_attrs.get(SCREENED))
        best = max(best, cheap)
        if t.user_attrs.get(SCREENED):  # the estimate the samplers read: cheap x the median full/cheap ratio (2)
            assert t.user_attrs[SCREEN_ATTR]["estimate"] == pytest.approx(2 * cheap)
            assert t.intermediate_values == {0: pytest.approx(2 * cheap)}
    assert {t.number for t in ranked(study, parse_objectives(None, "o", ["1x1"]))} == {t.number for t in complete}
    assert study.best_value == pytest.approx(80.0)  # Ring, 8+ channels, 4M buffers: the optimum, measured in full


def test_the_screen_switches_itself_off_once_too_few_trials_stop_at_the_cheap_bench():
    from envmatrix.search.screen import MIN_DECISIONS
    from envmatrix.search.summary import screen_line

    study, land, stats = searched(CostCheck(0.2, 1.0, 0.6, cheap_value=0.5, full_value=1.0), trials=30, keep=0.01)
    assert len(land.cheap_calls) == MIN_DECISIONS and len(land.full_calls) == 30 and stats.screened == 0
    line = screen_line(study)
    assert f"0 of {MIN_DECISIONS} trials stopped at the cheap fidelity, {MIN_DECISIONS} went on" in line
    assert "then off: a screened trial cost 1.20 of a full one, under the 1.5x trials it must buy" in line


def test_no_screening_when_the_cost_check_says_a_cheap_probe_does_not_pay():
    study, land, stats = searched(CostCheck(0.9, 1.0, 0.6, cheap_value=0.5, full_value=1.0))
    assert land.cheap_calls == [] and len(land.full_calls) == 25 and stats.screened == 0
    assert all(SCREEN_ATTR not in t.user_attrs for t in study.get_trials())


def test_a_failure_at_the_cheap_fidelity_is_the_trials_failure_and_the_full_bench_never_runs():
    study, land, _ = searched(CostCheck(0.2, 1.0, 0.6, cheap_value=0.5, full_value=1.0),
                              fail=lambda env: env["NCCL_ALGO"] == "Tree" and env["NCCL_MIN_NCHANNELS"] == "16")
    failed = [t for t in study.get_trials() if t.state == TrialState.FAIL]
    assert failed and all(t.user_attrs["failure_class"] == "nccl_refused" for t in failed)
    assert not set(land.full_calls) & {t.number for t in failed}
    from envmatrix.search.summary import screen_line

    stopped = sum(bool(t.user_attrs.get(SCREENED)) for t in study.get_trials())
    went_on = sum(t.state == TrialState.COMPLETE for t in study.get_trials())
    assert f"{stopped} of 25 trials stopped at the cheap fidelity, {went_on} went on to the full bench, " \
           f"{len(failed)} failed at the cheap one" in screen_line(study)
    assert all(t.user_attrs[SCREEN_ATTR] == {"value": None, "kept": False, "failed": True} for t in failed)


def test_a_study_whose_every_trial_stopped_at_the_cheap_bench_exports_nothing_and_says_why():
    from envmatrix.app.search import NothingMeasured, nothing_completed
    from envmatrix.errors import EXIT_INCONCLUSIVE, NoAnswer
    from envmatrix.search.export import best_trial

    study, land, _ = searched(CostCheck(0.2, 1.0, 0.6, cheap_value=1000.0, full_value=2000.0), trials=5)
    assert land.full_calls == [] and all(t.user_attrs.get(SCREENED) for t in study.get_trials())
    verdict = nothing_completed(study)
    assert isinstance(verdict, NothingMeasured) and verdict.exit_code == EXIT_INCONCLUSIVE
    assert "all 5 trials stopped at search.screen's cheap fidelity" in str(verdict)
    with pytest.raises(NoAnswer) as err:
        best_trial(study, parse_objectives(None, "o", ["1x1"]))
    assert err.value.exit_code == EXIT_INCONCLUSIVE and "all 5 stopped at search.screen's cheap fidelity" in str(err.value)


@pytest.mark.slow
def test_a_real_search_screens_at_the_cheap_bench_measures_in_full_only_what_may_win_and_reports_it(cli, tmp_path):
    """gloo 1x2, three settings of one variable whose busbw differ by noise only: keep 1.0 sends a trial to the full
    16M bench only when its 1M value beats every cheap value before it (the default env's included), so which trials
    stop is up to the noise (all three, at times: exit 3), and every verdict must follow that rule and be reported
    as such."""
    from search_helpers import load, run_search

    from envmatrix.engine.session import open_store_at

    conf = tmp_path / "s.yaml"
    conf.write_text("""
name: gloo_screen
backend: gloo
grids: [1x2]
probe:
  timeout_s: 120
  collectives: [allreduce]
  bench: {collectives: [allreduce], min_bytes: 1M, max_bytes: 16M, factor: 16, iters: 8, warmup: 1}
search:
  trials: 3
  sampler: bruteforce
  space: {TORCH_DISTRIBUTED_DEBUG: ["OFF", INFO, DETAIL]}
  confirm_top_k: 0
  screen: {max_bytes: 1M, keep: 1.0, pays_below: 1.0}
  objective: {collective: allreduce, size: 16M}
""")
    out = tmp_path / "run"
    done = run_search(cli, "search", f"conf={conf}", "--out", str(out))
    said = done.stdout + done.stderr
    assert done.returncode in (0, 3) and "not written" not in said, said  # 3: all stopped (CI run 110), see below
    assert "screen on: a cheap probe (allreduce@1M x8) took " in said, said
    study = load(out, "gloo_screen")
    check = study.user_attrs[BASELINE_ATTR][SCREEN_ATTR]
    assert check["on"] and 0 < check["cheap_s"] < check["full_s"] and check["cheap_value"] > 0 and check["full_value"] > 0
    trials = sorted(study.get_trials(), key=lambda t: t.number)
    assert len(trials) == 3
    best = check["cheap_value"]
    for t in trials:
        record = t.user_attrs[SCREEN_ATTR]
        if record["value"] < best:
            assert t.state == TrialState.PRUNED and t.user_attrs[SCREENED] and record["kept"] is False
            assert t.user_attrs["fidelity"] == "allreduce@1M x8" and record["estimate"] > 0
        else:
            assert t.state == TrialState.COMPLETE and record["kept"] is True
            assert t.user_attrs["fidelity"] == "allreduce@16M x8"
        best = max(best, record["value"])
    stopped = sum(t.state == TrialState.PRUNED for t in trials)
    if stopped == 3:  # nothing measured in full: inconclusive, one line saying why (its html report was a ValueError)
        assert done.returncode == 3 and "all 3 trials stopped at search.screen's cheap fidelity" in done.stderr, said
        assert (out / "report.html").exists()
    else:
        assert done.returncode == 0, said
    assert said.count(" -> screened: ") == stopped  # the command's line per trial says where it stopped
    md = (out / "search.md").read_text()
    assert f"{stopped} of 3 trials stopped at the cheap fidelity, {3 - stopped} went on to the full bench" in md
    # every cheap probe is in the store under a run key of its own: 3 trials and the default env's (the cost check);
    # the full ones: the trials that went on and the default env's (baseline and cost check, two attempts of one key)
    store = open_store_at(str(out))
    try:
        benches = [max(int(m["size_bytes"]) for m in r.metrics) for r in store.latest()]
        attempts = store.count()
    finally:
        store.close()
    assert benches.count(1 << 20) == 4 and benches.count(1 << 24) == 3 - stopped + 1 and attempts == 4 + 3 - stopped + 2
