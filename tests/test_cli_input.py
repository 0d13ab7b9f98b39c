"""Bad input: one line naming file/key/value and what is allowed, exit 2, nothing written."""

import json
import subprocess
import sys

import pytest

from conftest import write_conf

GOOD = "backend: gloo\ngrids: [1x2]\nsetups:\n  a: {NCCL_ALGO: Ring}\n"


def _bad(cli, tmp_path, *args):
    out = tmp_path / "out"
    done = cli.run("sweep", *args, "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envmatrix: error: "), done.stderr
    assert not out.exists(), "bad input must write nothing"
    return lines[0]


@pytest.mark.parametrize(
    "conf_text,expected",
    [
        (GOOD.replace("NCCL_ALGO: Ring", "NCCL_NET_GDR_LEVL: PHB"), ["setups.a.NCCL_NET_GDR_LEVL", "did you mean NCCL_NET_GDR_LEVEL?"]),
        (GOOD.replace("NCCL_ALGO: Ring", "NCCL_NET_GDR_LEVEL: PHX"), ["'PHX'", "LOC, PIX, PXB, PHB, SYS"]),
        (GOOD.replace("[1x2]", "[2y2]"), ["'2y2'", "NxP"]),
        (GOOD + "setups_extra: 1\n", ["setups_extra", "allowed:"]),
        ("backend: gloo\ngrids: [1x2\nsetups: {}\n", ["malformed YAML", "bad.yaml:3:"]),
        (GOOD.replace("backend: gloo", "backend: mpi"), ["backend", "'mpi'", "nccl, gloo"]),
        (GOOD + "strategies: [{kind: leave_ot, base: a, vars: [NCCL_ALGO]}]\n", ["leave_ot", "did you mean leave_out"]),
        (GOOD + "probe: {timeout_s: -1}\n", ["probe.timeout_s", "> 0"]),
        (GOOD + "probe: {colectives: [allreduce]}\n", ["colectives", "did you mean collectives?"]),
    ],
    ids=["typo", "bad-value", "bad-grid", "unknown-key", "malformed-yaml", "bad-backend", "bad-strategy", "bad-timeout", "probe-typo"],
)
def test_bad_conf(cli, tmp_path, conf_text, expected):
    conf = write_conf(tmp_path / "bad.yaml", conf_text)
    line = _bad(cli, tmp_path, f"conf={conf}")
    for text in expected:
        assert text in line


def test_missing_conf_file(cli, tmp_path):
    line = _bad(cli, tmp_path, "conf=aws_of")
    assert "conf=aws_of" in line and "did you mean aws_ofi" in line


@pytest.mark.slow
def test_bad_overrides(cli, tmp_path):
    conf = write_conf(tmp_path / "ok.yaml", GOOD)
    assert "grids=[1x2,2x2]" in _bad(cli, tmp_path, f"conf={conf}", "grids=1x2,2x2")
    assert "max_local_ranks" in _bad(cli, tmp_path, f"conf={conf}", "max_local_ranks=abc")
    assert "'2x9x'" in _bad(cli, tmp_path, f"conf={conf}", "grids=[2x9x]")
    assert "unknown key 'gridz'" in _bad(cli, tmp_path, f"conf={conf}", "gridz=[1x2]")


def test_grid_too_large_for_gloo_host(cli, tmp_path):
    conf = write_conf(tmp_path / "ok.yaml", GOOD)
    assert "max_local_ranks" in _bad(cli, tmp_path, f"conf={conf}", "grids=[8x4]")


def test_setup_cannot_override_safety_pin(cli, tmp_path):
    cli.env["NCCL_NVLS_ENABLE"] = "0"
    conf = write_conf(tmp_path / "pin.yaml", GOOD.replace("NCCL_ALGO: Ring", "NCCL_NVLS_ENABLE: 1"))
    line = _bad(cli, tmp_path, f"conf={conf}")
    assert "safety pin" in line and "NCCL_NVLS_ENABLE=0" in line


@pytest.mark.slow
def test_allow_unknown_vars_lets_site_variables_through(cli, tmp_path):
    conf = write_conf(tmp_path / "site.yaml", GOOD.replace("NCCL_ALGO: Ring", "MYSITE_FABRIC: slingshot"))
    _bad(cli, tmp_path, f"conf={conf}")
    done = cli.run("sweep", f"conf={conf}", "--allow-unknown-vars", "--dry-run")
    assert done.returncode == 0 and "MYSITE_FABRIC=slingshot" in done.stdout


def test_debug_shows_traceback(cli, tmp_path):
    done = cli.run("--debug", "sweep", "conf=nope_nope")
    assert done.returncode == 2 and "Traceback" in done.stderr


def test_help_on_every_command(cli):
    for args in (["--help"], ["sweep", "--help"]):
        done = cli.run(*args)
        assert done.returncode == 0 and "usage: envmatrix" in done.stdout
    assert "--dry-run" in cli.run("sweep", "--help").stdout


def test_dry_run_prints_plan_and_writes_nothing(cli, tmp_path):
    done = cli.run("sweep", "conf=aws_ofi.yaml", "backend=gloo", "--dry-run", "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr
    assert "4 setups x 4 grids = 16 runs" in done.stdout
    assert "export LD_LIBRARY_PATH=/soft/libraries/hwloc/lib/${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" in done.stdout
    assert "export LD_LIBRARY_PATH=/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" in done.stdout
    assert not (tmp_path / "o").exists()


def test_conf_by_name_with_and_without_suffix_and_overrides(cli):
    a = cli.run("sweep", "conf=aws_ofi", "backend=gloo", "grids=[1x2,2x2]", "probe.timeout_s=60", "--dry-run")
    b = cli.run("sweep", "conf=aws_ofi.yaml", "backend=gloo", "grids=[1x2,2x2]", "probe.timeout_s=60", "--dry-run")
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout and "4 setups x 2 grids = 8 runs" in a.stdout


def test_driver_never_imports_torch():
    code = (
        "import sys; from envmatrix.cli import build_parser; from envmatrix.app.inputs import prepare; "
        "build_parser(); prepare(['conf=aws_ofi', 'backend=gloo']); "
        "import envmatrix.app.sweep, envmatrix.reporting.console; "
        "assert 'torch' not in sys.modules, 'driver imported torch'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _gpus_visible(cli, tmp_path, count):
    """This host shows ``count`` GPUs: an nvidia-smi on PATH answering like the real one
    (hostinfo.parse_gpu_list's format, tested in test_hostinfo_and_transport)."""
    bin_dir = tmp_path / f"bin{count}"
    bin_dir.mkdir()
    rows = "".join(f"echo '{i}, NVIDIA H200, 570.00, 00000000:{0x18 + i:02X}:00.0'\n" for i in range(count))
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\n" + rows)
    (bin_dir / "nvidia-smi").chmod(0o755)
    cli.env["PATH"] = f"{bin_dir}:{cli.env['PATH']}"


NCCL_2X2 = ("backend=nccl", "grids=[2x2]", "launcher=mpirun")


@pytest.mark.parametrize("gpus_here", [2, 0])  # a 2-GPU node of the cluster, a GPU-less login node
def test_grid_across_hosts_is_checked_per_node_not_against_this_hosts_gpus(cli, tmp_path, gpus_here):
    _gpus_visible(cli, tmp_path, gpus_here)
    conf = write_conf(tmp_path / "ok.yaml", GOOD)
    done = cli.run("sweep", f"conf={conf}", *NCCL_2X2, "hosts=[node01,node02]", "--dry-run", "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--host node01:2,node02:2" in done.stdout and not (tmp_path / "o").exists()
    # the same grid with every rank on this host
    refused = (f"grids: 2x2 needs 4 GPUs for NCCL (one rank per GPU) but {gpus_here} are visible" if gpus_here
               else "backend: nccl needs GPUs but none are visible here")
    assert refused in _bad(cli, tmp_path, f"conf={conf}", *NCCL_2X2)


def test_grid_across_hosts_still_needs_ppn_gpus_per_node_and_a_host_per_node(cli, tmp_path):
    _gpus_visible(cli, tmp_path, 2)
    conf = write_conf(tmp_path / "ok.yaml", GOOD)
    hosts = "hosts=[node01,node02]"
    assert "2x4 needs 4 GPUs per node" in _bad(cli, tmp_path, f"conf={conf}", "backend=nccl", "launcher=mpirun", hosts, "grids=[2x4]")
    assert "3x1 needs 3 hosts but 2 are given" in _bad(cli, tmp_path, f"conf={conf}", "backend=nccl", "launcher=mpirun", hosts, "grids=[3x1]")


def test_auto_grids_with_hosts_fit_the_hosts(cli, tmp_path):
    _gpus_visible(cli, tmp_path, 4)
    conf = write_conf(tmp_path / "ok.yaml", GOOD)
    done = cli.run("sweep", f"conf={conf}", "backend=nccl", "grids=auto", "launcher=mpirun", "hosts=[node01,node02]",
                   "--dry-run", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert {r["grid"] for r in json.loads(done.stdout)["runs"]} == {"1x4", "2x1", "2x4"}  # no 4x1 on 2 hosts


def test_yaml_1_1_booleans_and_numbers_stay_the_text_written(cli, tmp_path):
    # YAML 1.1 reads OFF/on/yes/no as booleans and 0123 (octal), 0x10, 1_000, 1:30 as numbers: OFF became '0' (refused
    # as "value '0'" although the file says OFF), MY_ID: 0123 was exported as 83
    conf = write_conf(tmp_path / "c.yaml", "backend: gloo\ngrids: [1x2]\nseed: 7\nsetups:\n"
                      "  a: {TORCH_DISTRIBUTED_DEBUG: OFF, MY_ID: 0123, MY_T: 1:30, MY_N: 1_000}\n")
    done = cli.run("sweep", f"conf={conf}", "--dry-run", "--allow-unknown-vars", "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr
    for line in ("export TORCH_DISTRIBUTED_DEBUG=OFF", "export MY_ID=0123", "export MY_T=1:30", "export MY_N=1_000"):
        assert line in done.stdout, line
    assert not (tmp_path / "o").exists()


def test_a_whole_mapping_override_replaces_the_configs_mapping(cli, tmp_path):
    # was: "overrides: unknown key 'b'; allowed: name, backend, ..." (the schema's struct mode refused its new keys)
    conf = write_conf(tmp_path / "c.yaml", GOOD.replace("NCCL_ALGO: Ring", "TORCH_DISTRIBUTED_DEBUG: INFO"))
    done = cli.run("sweep", f"conf={conf}", "setups={b:{TORCH_DISTRIBUTED_DEBUG:OFF}}", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "(b)" in done.stdout and "(a)" not in done.stdout and "TORCH_DISTRIBUTED_DEBUG=OFF" in done.stdout


@pytest.mark.parametrize("flag,expected", [
    ("--gpu-pairs", "--gpu-pairs: '' not allowed; allowed: GPU pairs such as 0-3,1-7"),  # was: every pair measured
    ("--pair-size", "--pair-size: '' is not a size"),  # was: the default 256M
    ("--setup", "--setup '': names no setup"),  # was: the inherited env
])
def test_an_empty_pair_flag_is_refused_not_read_as_left_out(cli, tmp_path, flag, expected):
    # e.g. --gpu-pairs "$PAIRS" with PAIRS unset: an empty word is not the flag left out
    _gpus_visible(cli, tmp_path, 2)
    conf = write_conf(tmp_path / "c.yaml", GOOD.replace("backend: gloo", "backend: nccl"))
    out = tmp_path / "out"
    done = cli.run("bench", f"conf={conf}", "--pairs", "gpus", flag, "", "--out", str(out))
    assert done.returncode == 2 and not out.exists(), done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert expected in line
