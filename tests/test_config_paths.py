"""Names that become paths, and computed output paths that must stay under their parent."""

from __future__ import annotations

import os

import pytest

from envmatrix import paths
from envmatrix.config import compose_config
from envmatrix.config.resolve import resolve
from envmatrix.errors import ConfigError


@pytest.mark.parametrize("name, problem", [
    ("../../../escaped", "path separator"),
    ("..", "contains '..'"),
    ("a..b", "contains '..'"),
    ("/etc/passwd", "path separator"),
    ("a\\b", "path separator"),
    (".hidden", "starts with '.'"),
    ("-rf", "starts with '-'"),
    ("nul\x00byte", "NUL"),
    ("", "is empty"),
    ("x" * 101, "at most 100"),
    ("white space", "characters outside"),
    ("semi;colon", "characters outside"),
])
def test_bad_names_are_refused_with_a_safe_suggestion(name, problem):
    with pytest.raises(ConfigError) as err:
        paths.check_name(name, "name")
    text = str(err.value)
    assert problem in text and "\n" not in text
    suggestion = text.rsplit("(e.g. ", 1)[1].rstrip(")").strip("'")
    assert paths.check_name(suggestion, "name") == suggestion  # the shown mapping is itself valid


@pytest.mark.parametrize("name", ["default", "aws_ofi", "search_h200_2x2", "run-1", "a.b", "x+y=z,w@v", "0"])
def test_good_names_pass_unchanged(name):
    assert paths.check_name(name, "name") == name


def test_setup_names_keep_their_characters_but_not_path_escapes():
    assert paths.check_name("ring simple (0)", "setups", strict=False) == "ring simple (0)"
    with pytest.raises(ConfigError):
        paths.check_name("../x", "setups", strict=False)


def test_run_dir_default_stays_under_reports_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    got = paths.run_dir(None, "demo")
    assert got == os.path.realpath(tmp_path / "reports" / "runs" / "demo") and os.path.isdir(got)
    with pytest.raises(ConfigError, match="path separator"):
        paths.run_dir(None, "../../escaped")
    assert not (tmp_path / "escaped").exists() and not (tmp_path.parent / "escaped").exists()


def test_symlinked_run_dir_leaving_reports_runs_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports" / "runs").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, tmp_path / "reports" / "runs" / "demo")
    with pytest.raises(ConfigError, match="outside"):
        paths.run_dir(None, "demo")
    assert list(outside.iterdir()) == []


def test_under_refuses_escapes_and_accepts_children(tmp_path):
    assert paths.under(tmp_path, "a", "b") == os.path.realpath(tmp_path / "a" / "b")
    for bad in ("../x", "/etc", "a/../../x"):
        with pytest.raises(ConfigError, match="outside"):
            paths.under(tmp_path, bad)


def test_out_naming_a_file_or_an_uncreatable_dir(tmp_path):
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(ConfigError, match="exists and is not a directory"):
        paths.run_dir(str(afile), "n")
    with pytest.raises(ConfigError, match="cannot create the directory"):
        paths.run_dir(str(afile / "sub"), "n")
    with pytest.raises(ConfigError, match="NUL"):
        paths.run_dir("a\x00b", "n")
    assert afile.read_text() == "x"


@pytest.mark.parametrize("create", [False, True])
def test_out_naming_a_dangling_symlink_says_so(tmp_path, create):
    # makedirs said only 'cannot create the directory (File exists)' of a link whose target is gone
    link = tmp_path / "out"
    link.symlink_to(tmp_path / "gone" / "dir")
    with pytest.raises(ConfigError, match=r"a symbolic link to .*gone/dir, which does not exist"):
        paths.run_dir(str(link), "n", create=create)
    assert not (tmp_path / "gone").exists()


@pytest.mark.parametrize("override, what", [
    ("name=../../../escaped", "name="),
    ("search.study_name=../s", "study_name="),
])
def test_config_names_are_checked_at_resolve(override, what, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from envmatrix.search.study import parse_settings

    with pytest.raises(ConfigError) as err:
        cfg, conf_file = compose_config(["conf=default", override])
        inp = resolve(cfg, conf_file, gpus=0, pins={})
        parse_settings(inp.config["search"], "search", inp.name, 0)
    assert what in str(err.value)
    assert os.listdir(tmp_path) == []


def test_setup_name_with_a_path_escape_is_refused(tmp_path):
    conf = tmp_path / "c.yaml"
    conf.write_text("backend: gloo\ngrids: [1x2]\nsetups:\n  '../up': {NCCL_ALGO: Ring}\n")
    cfg, conf_file = compose_config([f"conf={conf}"])
    with pytest.raises(ConfigError, match="setups"):
        resolve(cfg, conf_file, gpus=0, pins={})
