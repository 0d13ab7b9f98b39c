"""The one validation layer (issue 39 point 10): every value on its way to a parser (YAML tree, OmegaConf, shlex,
int/float, size, duration, path, name) is checked by envmatrix.values, whose ConfigError is one line naming the key
and the value; and the issue's cases of bad input, each through the real command line (exit 2, one line, no
traceback, nothing written)."""

import datetime
import os
import sys

import pytest

from envmatrix import values
from envmatrix.errors import ConfigError
from conftest import write_conf

BAD = [  # (key type, call, bad values): at least three each
    ("yaml", lambda v: values.plain_tree("c.yaml", {"setups": {"a": {"NCCL_X": v}}}),
     [datetime.date(2024, 1, 1), datetime.datetime(2024, 1, 1, 12, 0), b"\x00binary", {1, 2}]),
    ("omegaconf", lambda v: values.plain_tree("c.yaml", {"name": v}), ["${HOME}", "${oc.env:HOME}", "a${x}b", "/x/${y"]),
    ("shlex", lambda v: values.words("probe.command", v), ['a "b', "a 'b", "a \\", "", "   ", 7]),
    ("int", lambda v: values.integer("--trials", v, minimum=1), ["x", "1.5", True, 1.5, "0", "", None]),
    ("float", lambda v: values.number("-f/--factor", v, above=1), ["x", "nan", "inf", True, "1", "-3"]),
    ("size", lambda v: values.size("-b/--min-bytes", v), ["64Q", "0", "-1", "1.5K", True, "", None]),
    ("duration", lambda v: values.duration("--timeout", v), ["x", "0", "-5s", "5y", True, "inf"]),
    ("path", lambda v: values.path("--env-file", v, "file"), ["", "/nonexistent/envmx", "a\x00b", 5, "/"]),
    ("name", lambda v: values.var_name("setups.a", v), ["", "A=B", "1X", "A B", "A-B", None]),
    ("index", lambda v: values.index("--objective", v, ["busbw"], "objective"), [1, -1, "x", 5]),
]


@pytest.mark.parametrize("kind,call,value", [(k, c, v) for k, c, vs in BAD for v in vs],
                         ids=[f"{k}-{i}" for k, _, vs in BAD for i in range(len(vs))])
def test_every_bad_value_is_one_line_naming_key_and_value(kind, call, value):
    with pytest.raises(ConfigError) as err:
        call(value)
    message = str(err.value)
    key = {"yaml": "setups.a.NCCL_X", "omegaconf": "name", "shlex": "probe.command", "int": "--trials",
           "float": "-f/--factor", "size": "-b/--min-bytes", "duration": "--timeout", "path": "--env-file",
           "name": "setups.a", "index": "--objective"}[kind]
    assert "\n" not in message and key in message and "allowed:" in message, message
    assert repr(value) in message or str(value) in message, message


def test_good_values_parse():
    assert values.words("probe.command", "a 'b c'") == ["a", "b c"] and values.size("-b", "64K") == 65536
    assert values.integer("--trials", "3", minimum=1) == 3 and values.number("-f", "1.5", above=1) == 1.5
    assert values.duration("--timeout", "5m") == 300 and values.var_name("k", "NCCL_ALGO") == "NCCL_ALGO"
    assert values.plain_tree("c.yaml", {"a": [1, "x", None, True, {"b": 2.5}]}) == {"a": [1, "x", None, True, {"b": 2.5}]}


def _one_line(done, *fragments):
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr and all(f in line for f in fragments), line


GOOD = "backend: gloo\ngrids: [1x2]\nsetups:\n  a: {NCCL_ALGO: Ring}\n"


@pytest.mark.parametrize("text,fragments", [
    (GOOD.replace("NCCL_ALGO: Ring", "ENVMATRIX_D: 2024-01-01"), ["setups.a.ENVMATRIX_D", "'2024-01-01'", "date"]),
    (GOOD + "name: 2024-01-01\n", ["name", "'2024-01-01'", "date"]),
    (GOOD.replace("NCCL_ALGO: Ring", "NCCL_ALGO: '${HOME}'"), ["setups.a.NCCL_ALGO", "${HOME}"]),
    (GOOD.replace("NCCL_ALGO: Ring", "'': x"), ["setups.a", "''", "is empty"]),
    (GOOD.replace("NCCL_ALGO: Ring", "'A=B': x"), ["setups.a.A=B", "'A=B'", "contains '='"]),
    (GOOD + "probe: {name: command, command: 'a \"b'}\n", ["probe.command", "'a \"b'", "quotation"]),
], ids=["date-value", "date-name", "interpolation", "empty-name", "name-with-equals", "unbalanced-quote"])
def test_bad_config_values_through_the_cli(cli, tmp_path, text, fragments):
    conf = write_conf(tmp_path / "c.yaml", text)
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"), "--allow-unknown-vars")
    _one_line(done, *fragments)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("args,fragments", [
    (("sweep", "conf=", "--dry-run"), ["conf=", "empty"]),
    (("sweep", "conf=default", "conf=aws_ofi", "--dry-run"), ["conf=aws_ofi", "second conf="]),
    (("sweep", "backend=gloo", "setups.a.NCCL_ALGO=${HOME}", "--dry-run"), ["setups.a.NCCL_ALGO", "${HOME}"]),
    (("bisect", "backend=gloo", "--grid", "1x1", "--env-file", "{env}", "--probe-cmd", "a 'b"), ["--probe-cmd", "quotation"]),
    (("bench", "backend=gloo", "-b", "64Q"), ["-b/--min-bytes", "'64Q'"]),
    (("bench", "backend=gloo", "-i", "8", "-f", "2"), ["-i/--step-bytes", "-f/--factor"]),
    (("search", "conf=search_demo", "backend=gloo", "--trials", "3", "search.trials=5", "--dry-run"), ["--trials 3", "search.trials=5"]),
    (("export", "--out", "{tmp}", "--storage", "sqlite:///{tmp}/s.db"), ["--storage", "--out"]),
], ids=["conf-empty", "conf-twice", "override-interpolation", "probe-cmd-quote", "bench-size-flag", "step-with-factor",
        "trials-twice", "out-with-storage"])
def test_bad_flags_through_the_cli(cli, tmp_path, args, fragments):
    env = tmp_path / "e.sh"
    env.write_text("export NCCL_ALGO=Ring\n")
    argv = [a.replace("{env}", str(env)).replace("{tmp}", str(tmp_path)) for a in args]
    done = cli.run(*argv)
    _one_line(done, *fragments)
    assert not (tmp_path / "s.db").exists() and not (tmp_path / "reports").exists()


def test_export_objective_out_of_range(cli, tmp_path):
    optuna = pytest.importorskip("optuna")
    from envmatrix.catalog import load_catalog
    from envmatrix.search.objective import parse_objectives
    from envmatrix.search.space import parse_search_space
    from envmatrix.search.study import STUDY_ATTR

    space = parse_search_space({"space": {"NCCL_ALGO": ["Ring", "Tree"]}}, load_catalog(), {}, "search")
    objectives = parse_objectives(None, "search.objective", ["1x1"])
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.sqlite'}", study_name="s",
                                directions=[o.direction for o in objectives])
    study.set_user_attr(STUDY_ATTR, {"space": space.to_json(), "objectives": [o.to_json() for o in objectives],
                                     "grids": ["1x1"], "backend": "gloo", "probe": {"name": "builtin"}})
    algo = optuna.distributions.CategoricalDistribution(["Ring", "Tree"])
    study.add_trial(optuna.trial.create_trial(params={"NCCL_ALGO": "Ring"}, distributions={"NCCL_ALGO": algo}, values=[1.0]))
    done = cli.run("export", "--out", str(tmp_path), "--objective", "5")
    _one_line(done, "--objective", "5", "from 0 to 0")
