"""QA findings F7 and F10 (/tmp/qa_configs/FINDINGS.md), through the CLI as users run it (gloo on CPU).

F7: two setups the user wrote by name with one env. A run is keyed on its env, not its name, so both were one run
and the second name vanished from the plan, matrix and JUnit without a word, while `bench --setup <second>` said it
was "not in" the config that holds it. Now every command refuses such a config in one line naming both setups
(exit 2, nothing written); a *generated* setup with an earlier one's env still runs once under that name, but the
plan says so, and --setup/--baseline take its name.

F10: a setup that set a variable the launcher owns (WORLD_SIZE, MASTER_ADDR, NCCL_HOSTID on a multi-node grid ...)
ran with the launcher's value while the stored row kept the setup's as its intended env. Now refused in one line
(exit 2, nothing written) wherever such an atom comes from: a config setup, bench --env, an --env-file.
"""

from __future__ import annotations

import pytest

from conftest import write_conf

from envmatrix.catalog import load_catalog
from envmatrix.config.resolve import CatalogValues
from envmatrix.errors import ConfigError
from envmatrix.strategies import expand_setups

DUPES = """
name: dupes
backend: gloo
grids: [1x2]
setups:
  baseline: {}
  control: {}
  info_a: {TORCH_DISTRIBUTED_DEBUG: INFO}
  info_b: {TORCH_DISTRIBUTED_DEBUG: INFO}
probe: {timeout_s: 30, collectives: [allreduce]}
"""

VALUES = CatalogValues(load_catalog())
BENCH = ("-c", "allreduce", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0")


def _one_line_refusal(done, *words):
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    for word in words:
        assert word in done.stderr, done.stderr
    return done.stderr


def test_two_written_setups_with_one_env_are_refused_naming_both():
    with pytest.raises(ConfigError, match=r"^c\.yaml: setups\.control: the same env as setups\.baseline .*allowed: "):
        expand_setups({"baseline": {}, "control": {}}, None, VALUES, where="c.yaml")
    # kind: explicit is written by name too
    with pytest.raises(ConfigError, match=r"^c\.yaml: strategies\[0\]\.setups\.b: the same env as setups\.a "
                                          r"\(TORCH_DISTRIBUTED_DEBUG=INFO\)"):
        expand_setups({"a": {"TORCH_DISTRIBUTED_DEBUG": "INFO"}},
                      [{"kind": "explicit", "setups": {"b": {"TORCH_DISTRIBUTED_DEBUG": "INFO"}}}], VALUES,
                      where="c.yaml")


def test_a_generated_setup_with_a_written_ones_env_is_merged_and_answers_to_its_name():
    from envmatrix.strategies import aliased

    setups = expand_setups({"info": {"TORCH_DISTRIBUTED_DEBUG": "INFO"}},
                           [{"kind": "product", "vars": {"TORCH_DISTRIBUTED_DEBUG": ["INFO", "DETAIL"]}}], VALUES)
    assert len(setups) == 2
    merged = [value for key, value in setups[0].meta if key == "alias"]
    assert len(merged) == 1
    found = aliased(setups, merged[0])
    assert found is not None and found.name == merged[0] and found.atoms == setups[0].atoms
    assert aliased(setups, "info") is None and aliased(setups, "nowhere") is None


@pytest.mark.slow
def test_every_command_refuses_two_written_setups_with_one_env(cli, tmp_path):
    conf = write_conf(tmp_path / "dupes.yaml", DUPES)
    out = tmp_path / "run"
    for args in (("sweep", f"conf={conf}", "--dry-run"), ("sweep", f"conf={conf}"),
                 ("bench", f"conf={conf}", "--setup", "info_b", "--grid", "1x2", *BENCH),
                 ("bisect", f"conf={conf}", "--failing", "1x2", "--setup", "info_b")):
        done = cli.run(*args, "--out", str(out), timeout=120)
        said = _one_line_refusal(done, "dupes.yaml: setups.control", "setups.baseline", "same env")
        assert "not in" not in said, said
        assert not out.exists(), args


@pytest.mark.slow
def test_a_merged_generated_setup_is_said_and_bench_takes_its_name(cli, tmp_path):
    conf = write_conf(tmp_path / "gen.yaml", """
name: gen
backend: gloo
grids: [1x2]
setups: {info: {TORCH_DISTRIBUTED_DEBUG: INFO}}
strategies: [{kind: product, vars: {TORCH_DISTRIBUTED_DEBUG: [INFO, DETAIL]}}]
probe: {timeout_s: 60, collectives: [allreduce]}
""")
    plan = cli.run("sweep", f"conf={conf}", "--dry-run", "--out", str(tmp_path / "run"), timeout=60)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    notes = [line for line in plan.stderr.splitlines() if "run once, as info" in line]
    assert len(notes) == 1, plan.stderr
    alias = notes[0].split("setup ", 1)[1].split(" has the env of", 1)[0]
    assert alias != "info" and "INFO" in alias, notes
    bench = cli.run("bench", f"conf={conf}", "--setup", alias, "--grid", "1x2", *BENCH,
                    "--out", str(tmp_path / "bench"), timeout=120)
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert f"({alias})" in bench.stdout, bench.stdout


IDENTITY = """
name: ident
backend: gloo
allow_ignored_vars: true
grids: {grids}
setups: {{plain: {{TORCH_DISTRIBUTED_DEBUG: INFO}}, mine: {setup}}}
probe: {{timeout_s: 30, collectives: [allreduce]}}
"""


@pytest.mark.slow
@pytest.mark.parametrize("grids, setup, words", [
    ("[1x2]", "{WORLD_SIZE: 7}", ("setups.mine.WORLD_SIZE: WORLD_SIZE=7", "WORLD_SIZE=2 on 1x2")),
    ("[1x2]", "{MASTER_ADDR: 10.255.255.1}", ("setups.mine.MASTER_ADDR", "MASTER_ADDR=127.0.0.1")),
    ("[1x2]", "{MASTER_PORT: null}", ("setups.mine.MASTER_PORT: unset MASTER_PORT",)),
    ("[1x2]", "{ENVMATRIX_RESULT_DIR: /tmp/nowhere}", ("setups.mine.ENVMATRIX_RESULT_DIR",)),
    ("[1x2, 2x1]", "{NCCL_HOSTID: myhost}", ("setups.mine.NCCL_HOSTID: NCCL_HOSTID=myhost", "on 2x1")),
    ("[1x2]", "{SLURM_PROCID: 3}", ("setups.mine.SLURM_PROCID", "rank identity")),
])
def test_a_setup_setting_a_launcher_owned_variable_is_refused(cli, tmp_path, grids, setup, words):
    conf = write_conf(tmp_path / "ident.yaml", IDENTITY.format(grids=grids, setup=setup))
    out = tmp_path / "run"
    done = cli.run("sweep", f"conf={conf}", "--allow-unknown-vars", "--out", str(out), timeout=120)
    _one_line_refusal(done, "ident.yaml: ", "allowed: leave", *words)
    assert not out.exists()


@pytest.mark.slow
def test_nccl_hostid_on_a_one_node_grid_is_the_setups(cli, tmp_path):
    conf = write_conf(tmp_path / "ident.yaml", IDENTITY.format(grids="[1x2]", setup="{NCCL_HOSTID: myhost}"))
    done = cli.run("sweep", f"conf={conf}", "--allow-unknown-vars", "--dry-run", "--json", "--out", str(tmp_path / "r"),
                   timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    # ... and bench on a two-node grid of the same config is refused (the config's grids did not have it)
    bench = cli.run("bench", f"conf={conf}", "--setup", "mine", "--grid", "2x1", *BENCH, "--allow-unknown-vars",
                    "--out", str(tmp_path / "b"), timeout=60)
    _one_line_refusal(bench, "ident.yaml: setups.mine.NCCL_HOSTID", "on 2x1")
    assert not (tmp_path / "b").exists()


@pytest.mark.slow
def test_flag_and_env_file_atoms_owned_by_the_launcher_are_refused(cli, tmp_path):
    conf = write_conf(tmp_path / "ok.yaml", IDENTITY.format(grids="[1x2]", setup="{TORCH_DISTRIBUTED_DEBUG: DETAIL}"))
    bench = cli.run("bench", f"conf={conf}", "--setup", "plain", "--env", "WORLD_SIZE=3", "--grid", "1x2", *BENCH,
                    "--allow-unknown-vars", "--out", str(tmp_path / "b"), timeout=60)
    _one_line_refusal(bench, "--env WORLD_SIZE: WORLD_SIZE=3", "WORLD_SIZE=2 on 1x2")
    env_file = tmp_path / "e.env"
    env_file.write_text("TORCH_DISTRIBUTED_DEBUG=INFO\nexport MASTER_ADDR=10.0.0.1\n")
    bisect = cli.run("bisect", f"conf={conf}", "--env-file", str(env_file), "--grid", "1x2", "--allow-unknown-vars",
                     "--out", str(tmp_path / "c"), timeout=60)
    _one_line_refusal(bisect, f"{env_file}: MASTER_ADDR: MASTER_ADDR=10.0.0.1", "MASTER_ADDR=127.0.0.1")
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


# F9: the warm pool forks ranks from servers that imported torch under their own env; what torch (c10's logging,
# the OpenMP runtime) reads at that import was the server's, whatever the rank's env said.


def test_a_variable_torch_reads_at_import_gets_a_server_of_its_own_value():
    from envmatrix.execution.pool import loader_key, server_env

    base = {"PATH": "/bin"}
    for var in ("TORCH_CPP_LOG_LEVEL", "OMP_NUM_THREADS"):
        rank = {**base, var: "1"}
        assert server_env(base, rank)[var] == "1"
        assert loader_key(rank) != loader_key(base)
    assert loader_key({**base, "TORCH_DISTRIBUTED_DEBUG": "INFO"}) == loader_key(base)  # re-read later, not keyed


@pytest.mark.slow
@pytest.mark.parametrize("setup,said", [
    ("{TORCH_CPP_LOG_LEVEL: INFO}", "[c10d]"),  # c10 logging reads it at import: a server of its own value
    # torch.distributed reads it at import too, which the server did under its own env: the child reads it again
    # (c10d says its debug level at INFO, when the level is read)
    ("{TORCH_DISTRIBUTED_DEBUG: DETAIL, TORCH_CPP_LOG_LEVEL: INFO}", "The debug level is set to DETAIL"),
], ids=["cpp-log-level", "distributed-debug"])
def test_a_pooled_rank_honours_what_torch_reads_at_import(cli, tmp_path, setup, said):
    import json

    conf = write_conf(tmp_path / "log.yaml", f"""
name: cpplog
backend: gloo
grids: [1x2]
setups: {{loud: {setup}}}
probe: {{timeout_s: 60, collectives: [allreduce]}}
""")
    run = tmp_path / "run"
    done = cli.run("sweep", f"conf={conf}", "--out", str(run), "--allow-unknown-vars", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    (report,) = run.glob("logs/*/*/rank0.json")
    assert json.loads(report.read_text())["versions"]["start"] == "pooled"  # the warm pool's path, not a cold start
    log = report.with_name("rank0.log").read_text()
    assert said in log, f"rank0.log of a pooled rank with {setup}: {log[:400]!r}"


@pytest.mark.slow
def test_bisect_setup_takes_the_name_of_a_merged_generated_setup(cli, tmp_path):
    conf = write_conf(tmp_path / "bis.yaml", """
name: bis
backend: gloo
grids: [1x2]
setups: {good: {TORCH_DISTRIBUTED_DEBUG: INFO}, bad: {GLOO_SOCKET_IFNAME: nope0}}
strategies: [{kind: product, vars: {GLOO_SOCKET_IFNAME: [nope0]}}]
probe: {timeout_s: 30, collectives: [allreduce]}
""")
    out = str(tmp_path / "run")
    sweep = cli.run("sweep", f"conf={conf}", "--out", out, timeout=120)
    assert sweep.returncode == 1, sweep.stdout + sweep.stderr
    (note,) = [line for line in sweep.stderr.splitlines() if "run once, as bad" in line]
    alias = note.split("setup ", 1)[1].split(" has the env of", 1)[0]
    bisect = cli.run("bisect", f"conf={conf}", "--failing", "1x2", "--setup", alias, "--out", out, timeout=120)
    assert bisect.returncode in (0, 1), bisect.stdout + bisect.stderr  # bisected, not refused as never run
    assert (tmp_path / "run" / "bisect_bad_1x2.md").exists(), bisect.stdout + bisect.stderr

