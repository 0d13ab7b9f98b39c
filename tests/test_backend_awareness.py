"""Backend awareness: gloo never reads NCCL_*/FI_*/plugin paths, so a gloo sweep of them must say so."""

import pytest

from conftest import write_conf
from envmatrix.catalog.backends import check_varied, ignored_by, readers
from envmatrix.env.atoms import PREPEND, Atom
from envmatrix.errors import ConfigError
from envmatrix.reporting.matrix import legend_for
from envmatrix.env.atoms import Setup


def test_families_know_their_readers():
    assert readers("NCCL_ALGO") == {"nccl"} and readers("FI_PROVIDER") == {"nccl"}
    assert readers("TORCH_NCCL_BLOCKING_WAIT") == {"nccl"}
    assert readers("GLOO_SOCKET_IFNAME") == {"gloo"}
    assert readers("MASTER_ADDR") == {"nccl", "gloo"} and readers("TORCH_DISTRIBUTED_DEBUG") == {"nccl", "gloo"}
    assert readers("LD_LIBRARY_PATH", "/opt/aws-ofi-nccl/lib") == {"nccl"}
    assert readers("LD_LIBRARY_PATH", "/usr/lib/x86_64-linux-gnu") == {"nccl", "gloo"}
    assert readers("SITE_SPECIFIC_THING") == {"nccl", "gloo"}  # unknown: never claimed ignored


def test_all_ignored_is_one_line_error_and_mixed_is_one_warning():
    nccl_only = [Atom("NCCL_ALGO", value="Ring"), Atom("FI_PROVIDER", value="efa"),
                 Atom("LD_LIBRARY_PATH", PREPEND, "/opt/amazon/ofi-nccl/lib")]
    with pytest.raises(ConfigError) as err:
        check_varied("gloo", nccl_only, "search")
    msg = str(err.value)
    assert "\n" not in msg and "NCCL_ALGO" in msg and "FI_PROVIDER" in msg and "search" in msg
    assert "--allow-ignored-vars" in msg
    assert check_varied("gloo", nccl_only, allow=True).startswith("warning: backend gloo ignores NCCL_ALGO")
    mixed = [*nccl_only, Atom("GLOO_SOCKET_IFNAME", value="lo")]
    warning = check_varied("gloo", mixed)
    assert warning == ("warning: backend gloo ignores NCCL_ALGO, FI_PROVIDER, "
                       "LD_LIBRARY_PATH=/opt/amazon/ofi-nccl/lib; results do not depend on them")
    assert check_varied("nccl", nccl_only) is None and check_varied("gloo", []) is None
    assert ignored_by("nccl", mixed) == ["GLOO_SOCKET_IFNAME"]


def test_legend_marks_ignored_variables():
    setups = [Setup("base"), Setup("ring", (Atom("NCCL_ALGO", value="Ring"), Atom("GLOO_SOCKET_IFNAME", value="lo")))]
    legend = dict(legend_for(setups, "gloo"))
    assert legend["ring"].endswith("[ignored by gloo: NCCL_ALGO]") and "[ignored" not in legend["base"]
    assert dict(legend_for(setups, "nccl"))["ring"].endswith("[ignored by nccl: GLOO_SOCKET_IFNAME]")
    assert legend_for(setups) == legend_for(setups, None) and "[ignored" not in str(legend_for(setups))


def test_a_command_probes_legend_marks_nothing_ignored():
    # docs/configuration.md: a command probe (nccl-tests, a script) reads NCCL_* whatever backend= says
    from envmatrix.planning import Grid, plan_runs
    from envmatrix.probes import get_probe
    from envmatrix.reporting.matrix import build_matrix

    setups = [Setup("base"), Setup("ring", (Atom("NCCL_ALGO", value="Ring"),))]
    command = get_probe("command").spec({"timeout_s": 60, "command": ["true"]})
    legend = dict(build_matrix(plan_runs(setups, [Grid(1, 1)], command, "gloo", "local"), []).legend)
    assert legend["ring"] == "+NCCL_ALGO=Ring", legend
    builtin = get_probe("builtin").spec({"timeout_s": 60})
    legend = dict(build_matrix(plan_runs(setups, [Grid(1, 1)], builtin, "gloo", "local"), []).legend)
    assert legend["ring"].endswith("[ignored by gloo: NCCL_ALGO]")


def test_gloo_sweep_of_nccl_only_variables_stops_before_launching(cli, tmp_path):
    conf = write_conf(tmp_path / "g.yaml", "backend: gloo\ngrids: [1x2]\nsetups:\n  ring: {NCCL_ALGO: Ring}\n"
                      "  tree: {NCCL_ALGO: Tree, FI_PROVIDER: efa}\nprobe: {timeout_s: 60}\n")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "NCCL_ALGO" in lines[0] and "gloo" in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_mixed_gloo_sweep_warns_once_and_marks_matrix(cli, tmp_path):
    conf = write_conf(tmp_path / "m.yaml", "backend: gloo\ngrids: [1x2]\nsetups:\n  base: {}\n"
                      "  both: {NCCL_ALGO: Ring, TORCH_DISTRIBUTED_DEBUG: DETAIL}\n"
                      "probe: {timeout_s: 60, collectives: [allreduce]}\n")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stdout + done.stderr
    warnings = [l for l in done.stderr.splitlines() if "warning" in l]
    assert warnings == ["envmatrix: warning: backend gloo ignores NCCL_ALGO; results do not depend on them"]
    assert "[ignored by gloo: NCCL_ALGO]" in (tmp_path / "o" / "matrix.md").read_text()


def test_command_probes_are_not_judged_by_the_torch_backend():
    # nccl-tests or a user script reads NCCL_* itself, whatever backend= says
    assert check_varied("gloo", [Atom("NCCL_ALGO", value="Ring")], probe="command") is None
    from envmatrix.catalog.backends import is_meaningful_study

    assert is_meaningful_study("nccl") and is_meaningful_study("gloo", "command")
    assert not is_meaningful_study("gloo", "builtin") and not is_meaningful_study("gloo", None)


@pytest.mark.slow
def test_gloo_search_writes_no_tuner_csv(cli, tmp_path):
    from search_helpers import gloo_bench_search_conf, run_search

    # mixed space (TORCH_DISTRIBUTED_DEBUG is read by gloo), so a search-side all-ignored guard does not stop it
    conf = gloo_bench_search_conf(tmp_path / "g.yaml", "gloo_tuner", """  baseline: false
  space: {NCCL_ALGO: [Ring, Tree], TORCH_DISTRIBUTED_DEBUG: ["OFF"]}""")
    out = tmp_path / "run"
    done = run_search(cli, "search", f"conf={conf}", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    exported = run_search(cli, "export", "--out", str(out))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert (out / "export" / "best.sh").exists() and not (out / "export" / "tuner.csv").exists()


def test_search_over_only_nccl_variables_on_gloo_is_refused_and_writes_nothing(cli, tmp_path):
    conf = write_conf(tmp_path / "n.yaml", "name: gloo_noise\nbackend: gloo\ngrids: [1x2]\n"
                      "search:\n  trials: 2\n  space: {NCCL_ALGO: [Ring, Tree]}\n")
    out = tmp_path / "run"
    done = cli.run("search", f"conf={conf}", "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "reads none of the variables this search varies (NCCL_ALGO)" in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()


@pytest.mark.parametrize("command", ["sweep", "bisect", "search"])
def test_the_flag_the_refusal_names_is_accepted_by_every_command_that_refuses(command):
    from envmatrix.cli import build_parser

    source = {"bisect": ["--env-file", "x.env"]}.get(command, [])
    assert build_parser().parse_args([command, *source, "--allow-ignored-vars"]).allow_ignored_vars


@pytest.mark.slow
def test_gloo_bisect_of_nccl_only_variables_is_refused_unless_allowed(cli, tmp_path):
    env_file = tmp_path / "site.env"
    env_file.write_text("export NCCL_ALGO=Ring\n")
    args = ("bisect", "backend=gloo", "--env-file", str(env_file), "--grid", "1x2", "--out", str(tmp_path / "o"))
    refused = cli.run(*args)
    assert refused.returncode == 2 and "--allow-ignored-vars" in refused.stderr and not (tmp_path / "o").exists()
    allowed = cli.run(*args, "--allow-ignored-vars")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr  # gloo ignores it: the env passes
    # prefixed as every other command's warnings are
    assert "envmatrix: warning: backend gloo ignores NCCL_ALGO" in allowed.stderr, allowed.stderr


@pytest.mark.parametrize("backend", ["auto", "gloo"])
def test_one_rule_however_the_backend_was_chosen(cli, tmp_path, backend):
    # issue 39 point 8: backend=auto resolving to gloo on this GPU-less host is gloo, as backend=gloo is
    text = f"backend: {backend}\ngrids: [1x2]\nsetups:\n  ring: {{NCCL_ALGO: Ring}}\n  tree: {{NCCL_ALGO: Tree}}\n"
    refused = cli.run("sweep", f"conf={write_conf(tmp_path / 'a.yaml', text)}", "--dry-run")
    assert refused.returncode == 2 and "reads none of the variables this sweep varies" in refused.stderr, refused.stderr
    allowed = cli.run("sweep", f"conf={write_conf(tmp_path / 'b.yaml', text + 'allow_ignored_vars: true' + chr(10))}",
                      "--dry-run")
    assert allowed.returncode == 0 and "warning: backend gloo ignores NCCL_ALGO" in allowed.stderr, allowed.stderr


def test_the_default_config_says_it_runs_on_gloo_anyway(cli):
    done = cli.run("sweep", "--dry-run")
    assert done.returncode == 0 and "warning: backend gloo ignores" in done.stderr, done.stderr
