"""Bisect on culprit placements and env shapes it was not tuned on (an audit's cases, each from a wrong answer)."""

import json

import pytest

from conftest import bisect_with_probe_script
from envmatrix.bisect import PASS
from envmatrix.bisect.peel import find_all_culprits, read_for, stage

# What the ranks printed on this host (normalised as bisect.signature does): torch's import failing on a bad
# library path, and gloo's init failing on a missing interface. Both are init_error outcomes.
LOADER = ("init_error", "importerror: /tmp/bad/libstdc++.so.#: file too short")
COMMAND_LOADER = ("exit_error", "./all_reduce_perf: error while loading shared libraries: libnccl.so.#: cannot open shared object file")
IFNAME = ("init_error", "runtimeerror: [enforce fail at device.cc:#] ifa != nullptr. unable to find address for: envmx_missing#")


def test_a_library_that_does_not_load_masks_every_init_failure():
    # the loader runs before any communicator exists: its failure is earlier than init, so a probe that got as
    # far as gloo's init held no bad library path
    assert stage(LOADER) < stage(IFNAME) and stage(COMMAND_LOADER) < stage(IFNAME)
    assert read_for(IFNAME, LOADER) == PASS and read_for(LOADER, IFNAME) == "unresolved"
    # NCCL failing to dlopen a NET plugin happens inside communicator init: an init failure, not a load one
    assert stage(("init_error", "nccl warn net/plugin : dlopen(libnccl-net.so) failed: cannot open shared object file")) == stage(IFNAME)


@pytest.mark.parametrize("lib,ifname", [(4, 9), (0, 13), (13, 0), (6, 7)])
def test_bad_library_path_and_bad_interface_both_named(lib, ifname):
    # 14 atoms, as in the audit's real run that ended at the probe cap (exit 3) naming only the library path
    def oracle(atoms):
        return LOADER if lib in atoms else IFNAME if ifname in atoms else PASS

    res = find_all_culprits(14, oracle, strict_after=True)
    assert res.status == "ok" and res.complete, (res.status, res.sections)
    assert [s.culprits for s in res.sections] == [[frozenset({lib})], [frozenset({ifname})]]
    assert set(res.final_env) == set(range(14)) - {lib, ifname}


@pytest.mark.slow
def test_bad_library_path_and_bad_interface_with_real_ranks(cli, tmp_path):
    # a directory whose libstdc++.so.6 is not a library: torch's import fails in every rank that has it on
    # LD_LIBRARY_PATH (the loader's "file too short"), before gloo could fail on the missing interface
    bad = tmp_path / "badlib"
    bad.mkdir()
    (bad / "libstdc++.so.6").write_text("not a library\n")
    harmless = ["NCCL_DEBUG=WARN", "NCCL_IB_DISABLE=1", "NCCL_BUFFSIZE=4194304", "GLOO_DEVICE_TRANSPORT=TCP",
                "TORCH_DISTRIBUTED_DEBUG=INFO", "NCCL_CROSS_NIC=1", "FI_PROVIDER=efa"]
    env_file = tmp_path / "env.sh"
    env_file.write_text("".join(f"export {v}\n" for v in harmless[:3]) + f"export LD_LIBRARY_PATH={bad}:$LD_LIBRARY_PATH\n"
                        + "".join(f"export {v}\n" for v in harmless[3:6]) + "export GLOO_SOCKET_IFNAME=envmx_missing0\n"
                        + f"export {harmless[6]}\n")
    done = cli.run("bisect", "backend=gloo", "probe.collectives=[allreduce]", "probe.timeout_s=30", "--grid", "1x2",
                   "--env-file", str(env_file), "--allow-ignored-vars", "--no-repair", "--out", str(tmp_path / "o"),
                   "--json", str(tmp_path / "r.json"))
    assert done.returncode == 1, done.stdout + done.stderr
    (report,) = json.loads((tmp_path / "r.json").read_text())
    assert [s["culprits"] for s in report["signatures"]] == [[[f"LD_LIBRARY_PATH={bad}:$LD_LIBRARY_PATH"]],
                                                              [["GLOO_SOCKET_IFNAME=envmx_missing0"]]]
    assert "file too short" in report["signatures"][0]["failure"]["line"]
    assert report["complete"] and report["recommended_proven"] and len(report["recommended_env"]) == len(harmless)


# A culprit whose failure shows from its second run on: the first run of every env that holds ENVMATRIX_FLAKY
# passes (a counter file per env), later runs fail; rank 0 decides, the other ranks pass.
FIRST_RUN_PASSES = """
import hashlib, os, sys
if os.environ.get("RANK", "0") != "0" or "ENVMATRIX_FLAKY" not in os.environ:
    sys.exit(0)
key = hashlib.sha1(",".join(sorted(k for k in os.environ if k.startswith("ENVMATRIX_H"))).encode()).hexdigest()
path = os.path.join(os.environ["COUNTERS"], key)
runs = int(open(path).read()) if os.path.exists(path) else 0
open(path, "w").write(str(runs + 1))
if runs:
    print("NCCL WARN transient timeout in proxy", flush=True)
    sys.exit(1)
"""


@pytest.mark.slow
def test_original_failure_is_the_envs_failure_when_its_first_run_passed(cli, tmp_path):
    env = ["ENVMATRIX_H1=1", "ENVMATRIX_FLAKY=1", "ENVMATRIX_H2=2"]
    done, report = bisect_with_probe_script(cli, tmp_path, FIRST_RUN_PASSES, env, "--repeats", "2", "--no-repair")
    assert done.returncode == 1 and report["culprits"] == [["ENVMATRIX_FLAKY=1"]], done.stdout + done.stderr
    # the env's first run passed, its settled outcome is the failure: that failure is the original one
    assert report["original_failure"] == {"outcome": "exit_error", "line": "transient timeout in proxy", "rank": 0}
    assert "Original failure: exit_error: transient timeout in proxy" in (tmp_path / "o" / "bisect_env_1x2.md").read_text()


ALWAYS_FAILS = "import sys\nprint('NCCL WARN NET/IB : port went down', flush=True)\nsys.exit(1)\n"


@pytest.mark.slow
def test_a_failure_no_variable_causes_shows_as_the_envs_failure_in_the_trail(cli, tmp_path):
    done, report = bisect_with_probe_script(cli, tmp_path, ALWAYS_FAILS, [f"ENVMATRIX_H{i}={i}" for i in range(9)])
    assert done.returncode == 3, done.stdout + done.stderr
    assert report["status"] == "baseline fails" and report["culprits"] == []
    # every probe failed the env's own way (the baseline too): 0, not "unresolved"
    assert {t["outcome"] for t in report["trail"]} == {"fail"} and report["trail"][-1]["atoms"] == "-"
    md = (tmp_path / "o" / "bisect_env_1x2.md").read_text()
    assert "The env without any of these variables fails too (the baseline probe)" in md


# Two failures of one stage (after init) with different lines: an interacting pair and an unrelated single culprit.
PAIR_LINE = ("exit_error", "cuda failure 'invalid argument' in allreduce")
SINGLE_LINE = ("exit_error", "wrong value in ring reduce")


@pytest.mark.parametrize("pair,single", [((0, 12), 6), ((3, 4), 5), ((11, 12), 0)])
def test_same_stage_failures_are_all_named_and_the_repaired_env_proven(pair, single):
    def oracle(atoms):
        return PAIR_LINE if set(pair) <= atoms else SINGLE_LINE if single in atoms else PASS

    res = find_all_culprits(13, oracle, strict_after=True)
    # the pair's line cannot be told apart from the single culprit's (one stage): the answer stays incomplete,
    # but it names both and a probe proves the env without them passes
    assert [s.culprits for s in res.sections] == [[frozenset(pair)], [frozenset({single})]]
    assert res.status == "incomplete" and not res.complete and not res.sections[0].complete
    assert set(res.final_env) == set(range(13)) - set(pair) - {single}


SAME_STAGE = """
import os, sys
e = os.environ
if e.get("ENVMATRIX_P") and e.get("ENVMATRIX_Q"):
    print("NCCL WARN Cuda failure 'invalid argument' in allreduce", flush=True); sys.exit(1)
if e.get("ENVMATRIX_S"):
    print("NCCL WARN wrong value in ring reduce", flush=True); sys.exit(1)
"""


@pytest.mark.slow
def test_same_stage_failures_with_real_ranks(cli, tmp_path):
    harmless = [f"ENVMATRIX_H{i}={i}" for i in range(10)]
    env = ["ENVMATRIX_P=1", *harmless[:5], "ENVMATRIX_S=1", *harmless[5:], "ENVMATRIX_Q=1"]
    done, report = bisect_with_probe_script(cli, tmp_path, SAME_STAGE, env, "--no-repair")
    assert done.returncode == 3, done.stdout + done.stderr  # not proven complete: the two lines are of one stage
    assert [s["culprits"] for s in report["signatures"]] == [[["ENVMATRIX_P=1", "ENVMATRIX_Q=1"]], [["ENVMATRIX_S=1"]]]
    assert report["recommended_proven"] and sorted(report["recommended_env"]) == sorted(harmless)
    md = (tmp_path / "o" / "bisect_env_1x2.md").read_text()
    assert "may hide more culprits of signature 1" in md
