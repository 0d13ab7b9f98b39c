"""Overrides that index a list or replace a nested mapping, through the real CLI (--dry-run, so nothing runs).

- ``~KEY.N`` removes an entry of any list, at any depth (grids, probe.collectives, strategies.0.sizes): one line,
  exit 2, as ``~strategies.0`` always was (it was a 46-line TypeError traceback, exit 1: Hydra cannot delete a list
  entry).
- A part that is no index of a list (grids.x=1x2) names the override and what is allowed (it was "g.yaml: invalid
  literal for int() with base 10: 'x'", or "unknown key 'x'" when grids was auto).
- A whole mapping replaces the config's at any depth, as docs/configuration.md says (setups.a={...}, search.space=,
  probe.bench=, strategies.0=); it merged into it below the top level, keeping the keys the override left out.
"""

from __future__ import annotations

import json

import pytest

from conftest import REPO, write_conf

G = """name: g
backend: gloo
allow_ignored_vars: true
grids: [1x2]
setups:
  a: {GLOO_SOCKET_IFNAME: lo, TORCH_DISTRIBUTED_DEBUG: INFO, GLOO_DEVICE_TRANSPORT: TCP}
  b: {TORCH_DISTRIBUTED_DEBUG: DETAIL}
probe:
  timeout_s: 30
  bench: {collectives: [allreduce, allgather], min_bytes: 4K, max_bytes: 64K, factor: 4, iters: 5, warmup: 1}
"""
STRATEGY = """name: st
backend: gloo
allow_ignored_vars: true
grids: [1x2]
setups:
  "0": {NCCL_ALGO: Ring, NCCL_PROTO: Simple, NCCL_CROSS_NIC: 1}
strategies:
  - kind: leave_out
    base: "0"
    vars: [NCCL_ALGO, NCCL_PROTO, NCCL_CROSS_NIC]
    sizes: [2]
"""


@pytest.fixture
def here(cli):
    cli.env["PYTHONPATH"] = str(REPO)  # this checkout, whatever an editable install elsewhere points at
    return cli


def refused(here, tmp_path, conf_text: str, *overrides: str, command: str = "sweep") -> str:
    """The one stderr line of a refused command: exit 2, no traceback, nothing written."""
    conf = write_conf(tmp_path / "c.yaml", conf_text)
    out = tmp_path / "o"
    done = here.run(command, f"conf={conf}", *overrides, "--out", str(out), "--dry-run", timeout=60)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert not out.exists() and not (tmp_path / "reports").exists()
    return lines[0]


def dry_run(here, tmp_path, conf_text: str, *overrides: str) -> dict:
    conf = write_conf(tmp_path / "c.yaml", conf_text)
    done = here.run("sweep", f"conf={conf}", *overrides, "--dry-run", "--json", timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def setup_vars(plan: dict) -> dict[str, dict[str, str]]:
    """Setup name -> the TORCH_/GLOO_DEVICE_/NCCL_ variables its first rank gets (the launcher adds the rest)."""
    keep = ("TORCH_DISTRIBUTED_DEBUG", "GLOO_DEVICE_TRANSPORT", "NCCL_ALGO", "NCCL_PROTO", "NCCL_CROSS_NIC")
    return {run["setup"]: {k: v for k, v in run["processes"][0]["env_set"].items() if k in keep} for run in plan["runs"]}


# --- ~KEY.N: an entry of any list, at any depth -------------------------------------------------------------------

@pytest.mark.parametrize("conf_text,overrides,listed", [
    (G, ["~grids.0"], "grids"),
    (G, ["~probe.collectives.0"], "probe.collectives"),
    (G, ["~probe.collectives.2"], "probe.collectives"),
    (G, ["~probe.bench.collectives.1"], "probe.bench.collectives"),
    (G, ["probe.collectives=[allreduce]", "~probe.collectives.0"], "probe.collectives"),  # a list an override made
    (STRATEGY, ["~strategies.0.sizes.0"], "strategies.0.sizes"),
    (STRATEGY, ["~strategies.0.vars.1"], "strategies.0.vars"),
    (G, ["~hosts.0"], "hosts"),  # refused before the config is read (submit checks so), the same words
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_removing_an_entry_of_any_list_is_one_line_like_strategies(here, tmp_path, conf_text, overrides, listed):
    line = refused(here, tmp_path, conf_text, *overrides)
    assert line == (f"envmatrix: error: override {overrides[-1]}: removes an entry of the list {listed}, which an "
                    f"override cannot; allowed: {listed}=[...] (the list without it)")


def test_the_list_entry_message_is_the_one_strategies_always_gave(here, tmp_path):
    assert refused(here, tmp_path, STRATEGY, "~strategies.0") == (
        "envmatrix: error: override ~strategies.0: removes an entry of the list strategies, which an override cannot; "
        "allowed: strategies=[...] (the list without it), or ~strategies.N.KEY (a key of entry N)")


def test_a_key_inside_a_list_entry_is_still_removed(here, tmp_path):
    setups = setup_vars(dry_run(here, tmp_path, STRATEGY, "~strategies.0.sizes"))  # sizes: its default, not [2]
    assert {"0-a", "0-ab"} <= set(setups)


# --- KEY.x=...: a part that is no index of the list -------------------------------------------------------------

@pytest.mark.parametrize("conf_text,override,listed,part", [
    (G, "grids.x=1x2", "grids", "x"),
    (G, "+grids.x=1x2", "grids", "x"),
    (G, "++grids.x=1x2", "grids", "x"),
    (G, "~grids.x", "grids", "x"),
    (G, "probe.collectives.x=allreduce", "probe.collectives", "x"),
    (G, "probe.collectives.x.y=1", "probe.collectives", "x"),
    (G, "probe.bench.collectives.first=allreduce", "probe.bench.collectives", "first"),
    (G, "hosts.x=node1", "hosts", "x"),
    (STRATEGY, "strategies.x=1", "strategies", "x"),
    (STRATEGY, "strategies.x.kind=random", "strategies", "x"),
    (STRATEGY, "strategies.0.sizes.x=1", "strategies.0.sizes", "x"),
], ids=lambda v: v if isinstance(v, str) and "\n" not in v else "")
def test_a_part_that_is_no_index_of_a_list_names_the_override(here, tmp_path, conf_text, override, listed, part):
    line = refused(here, tmp_path, conf_text, override)
    assert line.startswith(f"envmatrix: error: override {override}: {listed} is a list, and '{part}' is not an "
                           "index of it; allowed: "), line
    assert f"{listed}.N=" in line and f"{listed}=[...]" in line
    assert "invalid literal" not in line and "unknown key" not in line and "c.yaml" not in line


@pytest.mark.parametrize("override,part", [("grids.x=1x2", "x"), ("grids.0=1x2", "0"), ("~grids.0", "0")])
def test_an_entry_of_grids_auto_says_grids_holds_one_value(here, tmp_path, override, part):
    # was "overrides: unknown key 'x'; allowed: name, backend, ..." (~grids.0: "grids.0 is not set")
    line = refused(here, tmp_path, G.replace("grids: [1x2]", "grids: auto"), override)
    assert line == (f"envmatrix: error: override {override}: grids is 'auto', a single value, so it has no entry "
                    f"'{part}'; allowed: grids=... (a list of grids such as [1x2, 2x2], or auto)")


def test_a_key_inside_a_list_entry_that_is_text_names_the_entry(here, tmp_path):
    line = refused(here, tmp_path, G, "grids.0.x=1")  # was "overrides: unknown key 'x'; allowed: name, backend, ..."
    assert line == ("envmatrix: error: override grids.0.x=1: grids.0 is '1x2', a single value, so it has no entry "
                    "'x'; allowed: grids.0=... (a value in place of '1x2')")


@pytest.mark.parametrize("override,expected", [
    ("grids.99=1x2", "grids[99] is past the end of the list grids; allowed: "),
    ("grids.1.5=1x2", "grids[1] is past the end of the list grids; allowed: "),  # 1.5 reads as index 1, key 5
    ("probe.collectives.99=allreduce", "probe.collectives[99] is past the end of the list probe.collectives; allowed: "),
    ("hosts.0=node1", "hosts[0] is past the end of the list hosts; allowed: "),
    ("~grids.99", "grids.99 is not set, so there is nothing to remove; allowed: "),
    ("grids.-1=1x2", "Hydra cannot parse it"),
])
def test_an_index_past_the_end_or_negative_stays_one_line(here, tmp_path, override, expected):
    line = refused(here, tmp_path, G, override)
    assert line.startswith(f"envmatrix: error: override {override}: {expected}"), line


def test_an_entry_replaced_by_index_still_works(here, tmp_path):
    plan = dry_run(here, tmp_path, G, "grids.0=1x1")
    assert {run["grid"] for run in plan["runs"]} == {"1x1"}


# --- a whole mapping replaces the config's, at any depth ------------------------------------------------------------

def test_a_setup_given_whole_replaces_the_files_setup(here, tmp_path):
    plan = dry_run(here, tmp_path, G, "setups.a={TORCH_DISTRIBUTED_DEBUG: OFF}")
    assert setup_vars(plan) == {"a": {"TORCH_DISTRIBUTED_DEBUG": "OFF"}, "b": {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}}


def test_an_empty_setup_given_whole_empties_it(here, tmp_path):
    assert setup_vars(dry_run(here, tmp_path, G, "setups.a={}"))["a"] == {}


@pytest.mark.parametrize("overrides,expected", [
    # an earlier override inside the setup is replaced with it; a later one edits the new setup
    (["setups.a.GLOO_DEVICE_TRANSPORT=TCP", "setups.a={TORCH_DISTRIBUTED_DEBUG: OFF}"], {"TORCH_DISTRIBUTED_DEBUG": "OFF"}),
    (["~setups.a", "setups.a={TORCH_DISTRIBUTED_DEBUG: OFF}"], {"TORCH_DISTRIBUTED_DEBUG": "OFF"}),
    (["setups.a={TORCH_DISTRIBUTED_DEBUG: OFF}", "setups.a.GLOO_DEVICE_TRANSPORT=TCP"],
     {"TORCH_DISTRIBUTED_DEBUG": "OFF", "GLOO_DEVICE_TRANSPORT": "TCP"}),
    (["setups={a: {GLOO_DEVICE_TRANSPORT: TCP}}", "setups.a={TORCH_DISTRIBUTED_DEBUG: OFF}"],
     {"TORCH_DISTRIBUTED_DEBUG": "OFF"}),
])
def test_overrides_around_a_whole_setup_apply_in_order(here, tmp_path, overrides, expected):
    assert setup_vars(dry_run(here, tmp_path, G, *overrides))["a"] == expected


def test_a_top_level_mapping_given_whole_drops_an_earlier_override_inside_it(here, tmp_path):
    plan = dry_run(here, tmp_path, G, "setups.c={TORCH_DISTRIBUTED_DEBUG: OFF}", "setups={a: {}}")
    assert setup_vars(plan) == {"a": {}}  # c was set before the whole setups: replaced with it


def test_a_probe_mapping_given_whole_replaces_the_files(here, tmp_path):
    plan = dry_run(here, tmp_path, G, "probe.bench={collectives: [allgather], min_bytes: 4096, max_bytes: 4096}")
    bench = json.loads(plan["runs"][0]["processes"][0]["env_set"]["ENVMATRIX_PROBE"])["bench"]
    # the file's iters 5, warmup 1, factor 4 are gone: the probe's defaults fill what the override leaves out
    assert (bench["collectives"], bench["sizes"], bench["iters"], bench["warmup"]) == (["allgather"], [4096], 20, 5)


def test_a_strategy_entry_given_whole_replaces_the_files_entry(here, tmp_path):
    # the file alone: 0, 0-ab, 0-ac, 0-bc (sizes: [2]); merged, the override kept sizes [2]: 0, 0-ab
    plan = dry_run(here, tmp_path, STRATEGY, "strategies.0={kind: leave_out, base: '0', vars: [NCCL_ALGO, NCCL_PROTO]}")
    assert sorted(setup_vars(plan)) == ["0", "0-a", "0-b"]  # sizes back to its default [1], not the file's [2]


def test_a_new_nested_mapping_is_still_added(here, tmp_path):
    plan = dry_run(here, tmp_path, G, "setups.c={TORCH_DISTRIBUTED_DEBUG: OFF}")
    assert setup_vars(plan)["c"] == {"TORCH_DISTRIBUTED_DEBUG": "OFF"} and "a" in setup_vars(plan)


@pytest.mark.parametrize("override,key", [
    ("+setups.a={TORCH_DISTRIBUTED_DEBUG: OFF}", "setups.a"),
    ("+setups={c: {}}", "setups"),
    ("+probe.bench={collectives: [allgather]}", "probe.bench"),
])
def test_plus_on_a_mapping_the_file_sets_is_refused_as_on_a_scalar(here, tmp_path, override, key):
    # Hydra refuses +KEY on a set scalar but merged +KEY={...} into a set mapping, keeping the keys it left out
    assert refused(here, tmp_path, G, override) == (
        f"envmatrix: error: override {override}: {key} is already set, and + only adds a key that is not; "
        f"allowed: {override[1:]} (replace it) or +{override} (add or replace)")


def test_plus_adds_a_mapping_the_file_does_not_set(here, tmp_path):
    plan = dry_run(here, tmp_path, G, "+setups.c={TORCH_DISTRIBUTED_DEBUG: OFF}")
    assert setup_vars(plan)["c"] == {"TORCH_DISTRIBUTED_DEBUG": "OFF"}

@pytest.mark.parametrize("overrides,blamed", [
    (["setups.a.NCCL_PROTO=bogus"], "override setups.a.NCCL_PROTO=bogus: setups.a.NCCL_PROTO: "),
    (["setups.a={NCCL_PROTO: bogus}"], "override setups.a={NCCL_PROTO: bogus}: setups.a.NCCL_PROTO: "),
    (["setups={c: {NCCL_PROTO: bogus}}"], "override setups={c: {NCCL_PROTO: bogus}}: setups.c.NCCL_PROTO: "),
    # the last override that set the value, not an earlier one at the same setup
    (["setups.b.NCCL_PROTO=bogus", "setups.a.NCCL_ALGO=Ring"], "override setups.b.NCCL_PROTO=bogus: setups.b."),
])
def test_a_bad_value_an_override_set_names_the_override_not_the_file(here, tmp_path, overrides, blamed):
    # the file never held it: "c.yaml: setups.a.NCCL_PROTO: ..." sent the user to a file without the value
    assert refused(here, tmp_path, G, *overrides).startswith(f"envmatrix: error: {blamed}")


def test_a_bad_value_of_the_file_beside_an_override_still_names_the_file(here, tmp_path):
    bad = G.replace("b: {TORCH_DISTRIBUTED_DEBUG: DETAIL}", "b: {NCCL_PROTO: bogus}")
    assert refused(here, tmp_path, bad, "setups.a.NCCL_ALGO=Ring").startswith(
        "envmatrix: error: c.yaml: setups.b.NCCL_PROTO: ")

SEARCH = """name: s
backend: gloo
grids: [1x2]
probe: {timeout_s: 30}
search:
  trials: 2
  space:
    TORCH_DISTRIBUTED_DEBUG: ["OFF", INFO]
    GLOO_DEVICE_TRANSPORT: [null, TCP]
"""


def test_a_search_space_given_whole_replaces_the_files(here, tmp_path):
    conf = write_conf(tmp_path / "c.yaml", SEARCH)
    done = here.run("search", f"conf={conf}", "search.space={GLOO_DEVICE_TRANSPORT: [TCP]}", "--dry-run", timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "GLOO_DEVICE_TRANSPORT" in done.stdout and "TORCH_DISTRIBUTED_DEBUG" not in done.stdout, done.stdout
    assert "1 combinations" in done.stdout


def test_an_empty_search_space_is_empty_not_the_files(here, tmp_path):
    line = refused(here, tmp_path, SEARCH, "search.space={}", command="search")  # it silently kept the file's space
    assert "search.space" in line and "non-empty" in line, line


@pytest.mark.parametrize("override,blamed", [
    ("search.space={NCCL_PROTO: [bogus]}", "search.space.NCCL_PROTO[0]: value 'bogus'"),
    ("search.space.GLOO_DEVICE_TRANSPORT=[TCP,bogus]", "search.space.GLOO_DEVICE_TRANSPORT[1]: "),
    ("search.trials=0", "search.trials: "),
])
def test_a_bad_search_value_an_override_set_names_the_override(here, tmp_path, override, blamed):
    line = refused(here, tmp_path, SEARCH, override, command="search")
    assert line.startswith(f"envmatrix: error: override {override}: {blamed}"), line
