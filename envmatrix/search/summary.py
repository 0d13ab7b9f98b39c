"""A study's summary: best config, top-k, Pareto front, importances, failures, default-env baseline.

:func:`build_report` reads only the study (so it works for a study shared by a
fleet of workers); :func:`render_markdown` and :func:`print_report` show it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional

from envmatrix.search.export import gain_over, ranked, study_meta
from envmatrix.search.fidelity import FIDELITY_ATTR
from envmatrix.search.screen import SCREEN_ATTR, SCREENED
from envmatrix.search.space import varied
from envmatrix.search.study import BASELINE_ATTR, WORKER_LOST

Table = tuple[list[str], list[list[str]]]
MIN_TRIALS_FOR_IMPORTANCE = 4


@dataclass
class SearchReport:
    title: str
    summary: list[str] = field(default_factory=list)
    best_env: list[str] = field(default_factory=list)
    tables: list[tuple[str, Table]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def params_line(t: Any, names: Optional[list[str]] = None) -> str:
    """``NAME=value`` for each searched variable of trial ``t`` (``names``: which, in order; default its own),
    ``unset`` where the trial leaves the variable to NCCL."""
    return " ".join(f"{n}={'unset' if t.params.get(n) is None else t.params.get(n)}" for n in (names or list(t.params)))


def importances(study: Any, objectives: list, names: list[str]) -> Optional[Table]:
    """fANOVA importances of the first objective; None when fewer than 2 params vary or too few trials."""
    import optuna
    from optuna.trial import TrialState

    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    seen = [n for n in names if len({str(t.params.get(n)) for t in done}) > 1]
    if len(seen) < 2 or len(done) < MIN_TRIALS_FOR_IMPORTANCE:
        return None
    target = (lambda t: t.values[0]) if len(objectives) > 1 else None
    try:
        imp = optuna.importance.get_param_importances(study, params=seen, target=target)
    except (RuntimeError, ValueError) as exc:
        return (["note"], [[f"importances unavailable: {exc}"]])
    return (["parameter", f"importance for {objectives[0].name}"], [[k, f"{v:.3f}"] for k, v in imp.items()])


def build_report(study: Any, top_k: int = 10, storage_hint: str = "") -> SearchReport:
    from optuna.trial import TrialState

    space, objectives, meta = study_meta(study)
    names = list(space.vars)
    trials = study.get_trials(deepcopy=False)
    states: dict[str, int] = {}
    for t in trials:
        key = "forbidden" if t.user_attrs.get("forbidden") else SCREENED if t.user_attrs.get(SCREENED) else t.state.name.lower()
        if t.user_attrs.get("cached_from") is not None:
            key += " (cached)"
        states[key] = states.get(key, 0) + 1
    rep = SearchReport(title=f"envmatrix search {study.study_name}")
    rep.summary.append(f"grids {', '.join(meta.get('grids', []))}; backend {meta.get('backend')}; probe {meta.get('probe', {}).get('name')}; "
                       f"objectives {', '.join(f'{o.name} ({o.direction})' for o in objectives)}")
    rep.summary.append(f"space: {', '.join(f'{v} {len(space.choices(v))}' for v in names)} = {space.size} combinations, "
                       f"{len(space.allowed_rows())} allowed; fixed: {' '.join(str(a) for a in space.fixed.atoms) or '-'}")
    rep.summary.append("trials: " + ", ".join(f"{n} {k}" for k, n in sorted(states.items())))
    fidelities = Counter(str(t.user_attrs[FIDELITY_ATTR]) for t in trials
                         if t.state == TrialState.COMPLETE and t.user_attrs.get(FIDELITY_ATTR) is not None)
    if fidelities:  # one line per study: several fidelities in one ranking would be named here
        rep.summary.append("fidelity: " + "; ".join(f"{f} ({n} trials)" if len(fidelities) > 1 else f
                                                     for f, n in fidelities.items()))
    screened = screen_line(study)
    if screened:
        rep.summary.append(screened)
    order = ranked(study, objectives)
    if not order and states.get(SCREENED):
        rep.notes.append("no trial reached the full bench: every one stopped at the cheap fidelity, below "
                         "search.screen.keep of the best cheap value (the default env's included)")
    elif not order:
        rep.notes.append("no completed trial yet")
    else:
        best = order[0]
        setup = space.setup_of_params(best.params)
        rep.best_env = setup.shell_lines() or ["(inherited env only)"]
        rep.summary.append(f"best: trial {best.number}, " + ", ".join(f"{o.name} = {_fmt(v)}" for o, v in zip(objectives, best.values)))
        header = ["#", "trial", *[o.name for o in objectives], "fidelity", "params"]
        rows = [[str(i), str(t.number), *[_fmt(v) for v in t.values], str(t.user_attrs.get(FIDELITY_ATTR, "-")), params_line(t, names)]
                for i, t in enumerate(order[:top_k], 1)]
        rep.tables.append((f"top {min(top_k, len(order))} by {objectives[0].name}", (header, rows)))
        base = study.user_attrs.get(BASELINE_ATTR)
        kept = bool((study.user_attrs.get("confirmation") or {}).get("keep_default"))
        if base:
            rep.tables.append(("default env (empty setup) vs best", baseline_table(base, best, objectives, meta.get("grids", []), kept)))
    conf = study.user_attrs.get("confirmation")
    if conf:
        rows = [["default env" if r["label"] == "default" else f"trial {r['label']}", _fmt(r["median"]), _fmt(r["low"]),
                 _fmt(r["high"]), f"{r['spread']:.1%}", str(len(r["values"])), str(r["failed"])] for r in conf["ranking"]]
        rep.tables.append((f"confirmation: {conf['repeats']} interleaved rounds, {objectives[0].name}",
                           (["candidate", "median", "low", "high", "spread", "repeats", "failed"], rows)))
        rep.summary.append(f"confirmed: {conf['reason']}")
        if conf["keep_default"]:
            rep.best_env = ["# keep the default: no candidate's confirmed median beats the default env's"]
        else:
            winner = next(t for t in trials if t.number == conf["winner"])
            rep.best_env = space.setup_of_params(winner.params).shell_lines() or ["(inherited env only)"]
    if len(objectives) > 1:
        front = sorted(study.best_trials, key=lambda t: t.number)
        rows = [[str(t.number), *[_fmt(v) for v in t.values], params_line(t, names)] for t in front]
        rep.tables.append((f"Pareto front ({len(front)} trials)", (["trial", *[o.name for o in objectives], "params"], rows)))
    imp = importances(study, list(objectives), varied(space))
    if imp is not None:
        rep.tables.append(("parameter importances (fANOVA)", imp))
    fails = [t for t in trials if t.state == TrialState.FAIL and t.user_attrs.get("cached_from") is None]
    if fails:
        rows = [[str(t.number), str(t.user_attrs.get("failure_class", "?")), str(t.user_attrs.get("root_cause", ""))[:160],
                 params_line(t, names)] for t in fails]
        rep.tables.append((f"failed trials ({len(fails)}; {sum(t.user_attrs.get('failure_class') == WORKER_LOST for t in fails)} lost workers)",
                           (["trial", "class", "root cause", "params"], rows)))
        regions = failing_regions(space, trials)
        if regions:
            rep.tables.append(("failing regions (learned from the failed trials; the scale plan proposes nothing in them)",
                               (["region", "failed trials in it"], regions)))
    if storage_hint:
        rep.notes.append(f"dashboard: optuna-dashboard {storage_hint}")
    return rep


def screen_line(study: Any) -> Optional[str]:
    """search.screen's verdict: the cost check, how many trials stopped at the cheap fidelity, and whether the cheap
    values ranked the configs measured at both as the full ones did (search.fidelity.compare)."""
    from envmatrix.search.fidelity import compare
    from envmatrix.search.screen import MIN_GAIN, CostCheck, still_pays, trial_cost
    from envmatrix.search.study import screen_tally

    check = (study.user_attrs.get(BASELINE_ATTR) or {}).get(SCREEN_ATTR)
    if not check:
        return None
    cost = CostCheck.from_json(check)
    if not cost.on:
        return cost.line() + "; every trial ran the full bench"
    so_far = screen_tally(study, cost)
    out = (cost.line() + f"; {so_far.stopped} of {so_far.kept + so_far.stopped + so_far.failed} trials stopped at the "
           f"cheap fidelity, {so_far.kept} went on to the full bench"
           + (f", {so_far.failed} failed at the cheap one" if so_far.failed else ""))
    if not still_pays(cost.ratio, so_far.kept, so_far.stopped):
        out += (f"; then off: a screened trial cost {trial_cost(cost.ratio, so_far.kept, so_far.stopped):.2f} of "
                f"a full one, under the {MIN_GAIN:g}x trials it must buy")
    if len(so_far.both) >= 3:
        rho = compare(dict(enumerate(c for c, _ in so_far.both)), dict(enumerate(f for _, f in so_far.both))).rho
        out += f"; cheap vs full rank correlation over the {len(so_far.both)} configs measured at both: {rho:.2f}"
    return out


def failing_regions(space: Any, trials: Any) -> list[list[str]]:
    """The regions :func:`envmatrix.search.scale.learn_failures` draws from the study's verdicts (lost workers
    are no verdict on a config), each with the failed trials it holds."""
    from optuna.trial import TrialState

    from envmatrix.search.scale import learn_failures
    from envmatrix.search.structured import Layout

    ok, failed = [], []
    for t in trials:
        row = space.row_of(t.params)
        if row is None:
            continue
        if t.state == TrialState.COMPLETE:
            ok.append(row)
        elif t.state == TrialState.FAIL and t.user_attrs.get("failure_class") != WORKER_LOST:
            failed.append(row)
    model = learn_failures(Layout.of(space.space.values), ok, failed)
    names = model.describe(space.vars, space.space.values)
    return [[name, str(sum(model.holds(r, rule) for r in set(failed)))] for name, rule in zip(names, model.rules)]


def baseline_table(base: dict, best: Any, objectives: Any, grids: list[str], kept_default: bool = False) -> Table:
    """``kept_default``: the confirmation's interleaved repeats kept the default env, so the single measurement of
    the best trial is no gain to print a ratio for."""
    header = ["grid", "objective", "default env", "best", "best / default"]
    rows = []
    if base.get("failed"):
        return (["note"], [[f"default env failed: {base.get('failure_class')}: {base.get('root_cause')}"]])
    per_best = best.user_attrs.get("per_grid") or {}
    per_base = base.get("per_grid") or {}
    ratio = (lambda *_: "default kept (confirmed)") if kept_default else gain_over
    for i, o in enumerate(objectives):
        for g in grids:
            b, v = (per_base.get(g) or [None] * len(objectives))[i], (per_best.get(g) or [None] * len(objectives))[i]
            rows.append([g, o.name, _fmt(b), _fmt(v), ratio(v, b, o.direction)])
        b, v = base["values"][i], best.values[i]
        rows.append(["all", o.name, _fmt(b), _fmt(v), ratio(v, b, o.direction)])
    return (header, rows)


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def render_markdown(rep: SearchReport) -> str:
    parts = [f"# {rep.title}", "", *[f"- {s}" for s in rep.summary], ""]
    if rep.best_env:
        parts += ["## best config", "", "```bash", *rep.best_env, "```", ""]
    for title, (header, rows) in rep.tables:
        parts += [f"## {title}", "", _md_table(header, rows), ""]
    parts += [f"_{n}_" for n in rep.notes]
    return "\n".join(parts) + "\n"


def print_report(console: Any, rep: SearchReport) -> None:
    from rich.table import Table as RichTable
    from rich.text import Text

    console.print(f"[bold]{rep.title}[/bold]")
    for s in rep.summary:
        console.print(Text(s))
    if rep.best_env:
        console.print(Text("best config:\n  " + "\n  ".join(rep.best_env)))
    for title, (header, rows) in rep.tables:
        table = RichTable(title=title)
        for col in header:
            table.add_column(col, overflow="fold")
        for row in rows:
            table.add_row(*[Text(c) for c in row])
        console.print(table)
    for n in rep.notes:
        if not n.startswith("dashboard:"):  # the command prints it last
            console.print(Text(n))
