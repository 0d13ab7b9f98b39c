"""Bisect on culprit placements and env shapes it was not tuned on (an audit's cases, each from a wrong answer)."""

import json

import pytest

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
