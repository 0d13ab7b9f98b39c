"""Composition: Hydra defaults lists in user configs, did-you-mean at every level, overrides into nested mappings."""

from __future__ import annotations

import os

import pytest

from envmatrix.config import compose_config
from envmatrix.config.compose import suggest_key
from envmatrix.config.resolve import resolve
from envmatrix.errors import ConfigError, did_you_mean


def _resolve(*overrides: str):
    cfg, conf_file = compose_config(list(overrides))
    return resolve(cfg, conf_file, gpus=0, pins={})


def _error(*overrides: str) -> str:
    with pytest.raises(ConfigError) as err:
        _resolve(*overrides)
    text = str(err.value)
    assert "\n" not in text
    return text


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A user config directory outside the repo, and a cwd that is neither the repo nor that directory."""
    user = tmp_path / "site_confs"
    user.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return user


def test_defaults_list_applies_the_packaged_base_then_self(elsewhere):
    (elsewhere / "mine.yaml").write_text(
        "defaults: [aws_ofi, _self_]\nname: mine\ngrids: [1x2]\nsetups:\n  '0': {FI_MR_CACHE_MONITOR: memhooks}\n")
    inp = _resolve(f"conf={elsewhere / 'mine.yaml'}")
    assert inp.name == "mine" and [g.label for g in inp.grids] == ["1x2"]
    assert [s.name for s in inp.setups] == ["0", "1", "2", "3"]  # from aws_ofi
    zero = {a.var: a.value for a in inp.setups[0].atoms}
    assert zero["FI_MR_CACHE_MONITOR"] == "memhooks"  # _self_ wins over the base
    assert zero["NCCL_NET"] == "AWS Libfabric"  # the base's other keys survive the deep merge


def test_a_config_without_a_name_is_named_by_its_file_not_by_its_base(elsewhere):
    # docs/configuration.md: name defaults to the file's stem; the base's name would put this config's runs into the
    # base's run directory (reports/runs/aws_ofi), resumed from and mixed with the bundled config's store
    (elsewhere / "mine.yaml").write_text("defaults: [aws_ofi, _self_]\ngrids: [1x2]\n")
    assert _resolve(f"conf={elsewhere / 'mine.yaml'}").name == "mine"
    (elsewhere / "top.yaml").write_text("defaults: [mine]\nseed: 7\n")
    assert _resolve(f"conf={elsewhere / 'top.yaml'}").name == "top"


def test_self_first_lets_the_base_win(elsewhere):
    (elsewhere / "mine.yaml").write_text("defaults: [_self_, aws_ofi]\nname: mine\ngrids: [1x2]\n")
    inp = _resolve(f"conf={elsewhere / 'mine.yaml'}")
    assert [g.label for g in inp.grids] == ["1x4", "2x1", "2x2", "2x4"]


def test_defaults_prefers_a_sibling_user_config_and_chains(elsewhere):
    (elsewhere / "base.yaml").write_text("defaults: [default]\nname: base\nbackend: gloo\ngrids: [1x2]\n")
    (elsewhere / "top.yaml").write_text("defaults: [base]\nname: top\nseed: 7\n")
    inp = _resolve(f"conf={elsewhere / 'top.yaml'}")
    assert (inp.name, inp.seed, inp.backend) == ("top", 7, "gloo")
    assert {s.name for s in inp.setups} == {"baseline", "no_p2p", "no_shm", "ring_simple"}


@pytest.mark.parametrize("entry, expect", [
    ("[{probe: command}]", "can't be honoured"),
    ("['override probe: command']", "can't be honoured"),
    ("[no_such_conf]", "no such config file"),
    ("aws_ofi", "is not a list"),
    ("[loop]", "includes itself"),
])
def test_defaults_forms_that_cannot_be_honoured_are_one_line_errors(elsewhere, entry, expect):
    (elsewhere / "loop.yaml").write_text(f"defaults: {entry}\nname: loop\n")
    assert expect in _error(f"conf={elsewhere / 'loop.yaml'}")


@pytest.mark.parametrize("override, expect", [
    ("trials=4", "unknown key 'trials' (did you mean search.trials?)"),
    ("timeout_s=4", "(did you mean probe.timeout_s?)"),
    ("collectivs=[allreduce]", "(did you mean probe.collectives?)"),
    ("extra_args=[-v]", "(did you mean launcher_opts.<launcher>.extra_args?)"),
    ("bakend=gloo", "(did you mean backend?)"),
    ("probe.timout_s=4", "unknown key 'timout_s' (did you mean timeout_s?)"),
    ("launcher_opts.hosts=[a]", "write launcher_opts.<launcher>.hosts"),
    ("launcher_opts.mpirn.extra_args=[-v]", "unknown launcher 'mpirn' (did you mean mpirun?)"),
])
def test_did_you_mean_at_every_level(override, expect):
    assert expect in _error("conf=default", override)


@pytest.mark.parametrize("override", ["expect.allreduce.64M.busbw_gbps=250", "expect.1x4.allreduce.1024.time_us=5"])
def test_an_override_key_hydra_cannot_parse_is_blamed_not_its_value(override):
    message = _error("conf=default", override)
    assert "Hydra cannot parse it" in message and "must start with a letter" in message and "quote the value" not in message


def test_unknown_launcher_option_is_named_for_the_launcher_in_use():
    assert "unknown key 'extra_arg' (did you mean extra_args?)" in _error(
        "conf=default", "grids=[1x2]", "launcher=mpirun", "launcher_opts.mpirun.extra_arg=[-v]")


def test_unknown_search_key_gets_did_you_mean():
    from envmatrix.search.study import parse_settings

    cfg, conf_file = compose_config(["conf=search_demo", "search.trails=4"])
    with pytest.raises(ConfigError, match=r"unknown key 'trails' \(did you mean trials\?\)"):
        parse_settings(dict(cfg.search), "search", "search_demo", 0)


def test_did_you_mean_never_suggests_the_rejected_name():
    assert did_you_mean("hosts", ["hosts", "host"]) == " (did you mean host?)"
    assert did_you_mean("hosts", ["hosts"]) == ""
    for key in ("hosts", "name", "search", "probe"):
        assert f"did you mean {key}?" not in suggest_key(key)


def test_dotted_overrides_create_nested_keys_the_config_lacks():
    inp = _resolve("conf=default", "launcher=mpirun", "launcher_opts.mpirun.extra_args=[--oversubscribe]",
                   "launcher_opts.mpirun.no_export=[SITE_X]", "grids=[1x2]")
    assert inp.launcher_opts == {"extra_args": ["--oversubscribe"], "no_export": ["SITE_X"]}
    inp = _resolve("conf=default", "search.trials=3", "setups.extra.NCCL_ALGO=Ring", "probe.timeout_s=9")
    assert inp.config["search"]["trials"] == 3 and inp.probe.params["timeout_s"] == 9
    assert {a.var: a.value for a in next(s for s in inp.setups if s.name == "extra").atoms} == {"NCCL_ALGO": "Ring"}
    # Hydra's own forms keep working.
    assert _resolve("conf=default", "+search.top_k=2").config["search"]["top_k"] == 2
    assert _resolve("conf=default", "grids=[1x2]", "launcher=mpirun", "++launcher_opts.mpirun.emulate=auto").launcher_opts == {"emulate": "auto"}


def test_duplicate_setup_names_and_non_utf8_confs_are_refused(tmp_path):
    dup = tmp_path / "dup.yaml"
    dup.write_text("backend: gloo\ngrids: [1x2]\nsetups:\n  a: {NCCL_ALGO: Ring}\n  a: {NCCL_ALGO: Tree}\n")
    assert "duplicate key 'a'" in _error(f"conf={dup}")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("name: caf\xe9\nbackend: gloo\n".encode("latin-1"))
    assert "not UTF-8 text" in _error(f"conf={latin}")


def test_yaml_merge_keys_compose_setups_and_an_explicit_key_wins(tmp_path):
    # `<<: *base` is YAML an admin writes to share a base env; it was "malformed YAML (could not determine a
    # constructor for the tag 'tag:yaml.org,2002:merge')" because the duplicate-key check constructed the << key
    conf = tmp_path / "merge.yaml"
    conf.write_text("backend: gloo\ngrids: [1x2]\nsetups:\n  base: &b {NCCL_ALGO: Ring, NCCL_PROTO: LL}\n"
                    "  tree: {<<: *b, NCCL_ALGO: Tree}\n")
    setups = {s.name: {a.var: a.value for a in s.atoms} for s in _resolve(f"conf={conf}").setups}
    assert setups == {"base": {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}, "tree": {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"}}
    conf.write_text("backend: gloo\ngrids: [1x2]\nsetups:\n  base: &b {NCCL_ALGO: Ring}\n"
                    "  tree: {<<: *b, NCCL_ALGO: Tree, NCCL_ALGO: Ring}\n")
    assert "duplicate key 'NCCL_ALGO'" in _error(f"conf={conf}")  # written twice beside the merge: still refused


@pytest.mark.parametrize("override", ["hydra.verbose=true", "+hydra.job.chdir=true", "hydra.run.dir=/tmp/x"])
def test_hydra_runner_settings_are_refused_not_ignored(override):
    text = _error("conf=default", override)  # each was accepted and changed nothing
    assert text.startswith(f"override {override}: hydra.* configures Hydra's application runner"), text


def test_the_composition_file_is_not_a_config():
    # conf=config read conf/config.yaml as a config: "conf=envmatrix_schema: no such config file", a name never typed
    for value in ("config", "config.yaml"):
        text = _error(f"conf={value}")
        assert text.startswith(f"conf={value}: ") and "is the composition file" in text and "envmatrix_schema" not in text


def test_conf_found_from_any_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _resolve("conf=aws_ofi", "grids=[1x2]").name == "aws_ofi"
    assert os.listdir(tmp_path) == []


# One dotted override per top-level schema key, each checked where it lands (the test below keeps it complete).
DOTTED_OVERRIDES = [
    ("name=other", lambda inp: inp.name == "other"),
    ("description=hello", lambda inp: inp.config["description"] == "hello"),
    ("backend=gloo", lambda inp: inp.backend == "gloo"),
    ("allow_ignored_vars=false", lambda inp: inp.config["allow_ignored_vars"] is False),
    ("grids=[1x2,2x1]", lambda inp: [g.label for g in inp.grids] == ["1x2", "2x1"]),
    ("launcher=local", lambda inp: inp.launcher == "local"),
    ("setups.new.NCCL_PROTO=Simple", lambda inp: "new" in {s.name for s in inp.setups}),
    ("strategies=[{kind:product,base:null,vars:{NCCL_ALGO:[Ring,Tree]}}]", lambda inp: len(inp.setups) == 6),
    ("probe.timeout_s=7", lambda inp: inp.probe.params["timeout_s"] == 7),
    ("probe.collectives=[allreduce]", lambda inp: inp.probe.params["collectives"] == ["allreduce"]),
    ("seed=3", lambda inp: inp.seed == 3),
    ("max_local_ranks=8", lambda inp: inp.config["max_local_ranks"] == 8),
    ("search.trials=2", lambda inp: inp.config["search"]["trials"] == 2),
    ("search.space.NCCL_ALGO=[Ring,Tree]", lambda inp: inp.config["search"]["space"]["NCCL_ALGO"] == ["Ring", "Tree"]),
    ("hosts=[h1,h2]", lambda inp: inp.hosts == ("h1", "h2")),
    ("launcher_opts.mpirun.emulate=auto", lambda inp: inp.config["launcher_opts"]["mpirun"]["emulate"] == "auto"),
    ("hermetic=true", lambda inp: inp.hermetic is True),
    ("network.b1.rate=1gbit", lambda inp: [c.describe() for c in inp.conditions] == ["rate=1gbit"]),
    ("network_options.interface=eth1", lambda inp: inp.network_options.interface == "eth1"),
    ("expect.allreduce.67108864.busbw_gbps=250", lambda inp: [(e.collective, e.size_bytes, e.metric, e.value, e.grid)
                                                              for e in inp.expectations]
     == [("allreduce", 64 << 20, "busbw_gbps", 250.0, None)]),
]


@pytest.mark.parametrize("override, check", DOTTED_OVERRIDES)
def test_every_documented_key_is_settable_by_a_dotted_override(override, check):
    from envmatrix.config.schema import SweepSchema

    assert override.split("=", 1)[0].split(".", 1)[0] in SweepSchema.__dataclass_fields__
    # hosts are for launchers that start ranks elsewhere; the local launcher refuses them
    launcher = ["launcher=mpirun"] if override.startswith("hosts=") else []
    assert check(_resolve("conf=default", "grids=[1x2]", *launcher, override))


def test_the_key_table_above_covers_every_schema_field():
    from envmatrix.config.schema import SweepSchema

    covered = {override.split("=", 1)[0].split(".", 1)[0] for override, _ in DOTTED_OVERRIDES}
    assert set(SweepSchema.__dataclass_fields__) - covered == set(), "add a dotted-override case to DOTTED_OVERRIDES"


def test_configs_command_lists_every_bundled_config(capsys):
    from envmatrix.cli import main
    from envmatrix.config.compose import CONF_DIR

    assert main(["configs"]) == 0
    out = capsys.readouterr().out
    names = sorted(p.stem for p in CONF_DIR.glob("*.yaml") if p.stem != "config")
    listed = [ln.split()[0] for ln in out.splitlines()[: len(names)]]
    assert listed == names
    assert "Seed 003" in out and f"{len(names)} configs in {CONF_DIR}" in out
