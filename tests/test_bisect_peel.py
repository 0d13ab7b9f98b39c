"""Failure signatures as outcomes: masking, peeling, the probe cap and free probes (pure + real processes)."""

import json
import random
import sys

import pytest

from envmatrix.bisect.peel import default_max_probes, find_all_culprits, read_for, stage
from envmatrix.bisect import PASS

INIT = ("exit_error", "nccl warn net/ib : no device found.")
LATER = ("exit_error", "nccl warn pat algorithm unsupported")


def masked_oracle(a, b, log=None):
    def oracle(atoms):
        if log is not None:
            log.append(atoms)
        if a in atoms:
            return INIT
        return LATER if b in atoms else PASS

    return oracle


def test_stages_order_a_bare_exit_by_its_line():
    assert stage(INIT) == 1 and stage(LATER) == 2 and stage(("init_error", "x")) == 1
    assert read_for(LATER, INIT) == PASS  # a later failure: the init culprit is absent
    assert read_for(INIT, LATER) == "unresolved"  # init masks the later failure: unknown, never pass
    assert read_for(("exit_error", "other later line"), LATER) == "unresolved"  # same stage: unknown
    assert read_for("unresolved", LATER) == "unresolved" and read_for(LATER, LATER) == "fail"


def test_forced_algorithm_rejected_at_the_first_collective_is_later_than_a_net_init_failure():
    # As seen on the 2xH200 box: torch's barrier runs the first collective inside the probe's init phase,
    # so NCCL_ALGO=PAT is reported as init_error, yet NCCL_NET=IB fails before any collective and masks it.
    net = ("init_error", "failed to initialize any net plugin")
    pat = ("init_error", "error : no algorithm/protocol available for function allreduce with datatype "
                         "ncclfloat#. nccl_algo was set to pat.")
    assert stage(net) == 1 and stage(pat) == 2
    assert read_for(pat, net) == PASS and read_for(net, pat) == "unresolved"
    res = find_all_culprits(11, lambda s: net if 1 in s else (pat if 6 in s else PASS))
    assert [sorted(map(sorted, sec.culprits)) for sec in res.sections] == [[[1]], [[6]]]


@pytest.mark.parametrize("seed", range(6))
def test_masked_pair_both_found_and_repaired_env_proven(seed):
    rng = random.Random(seed)
    a, b = rng.sample(range(24), 2)
    log = []
    res = find_all_culprits(24, masked_oracle(a, b, log))
    assert [s.signature for s in res.sections] == [INIT, LATER]
    assert [s.culprits for s in res.sections] == [[frozenset({a})], [frozenset({b})]]
    assert res.complete and res.status == "ok"
    assert set(res.final_env) == set(range(24)) - {a, b} and frozenset(res.final_env) in log  # proven by a probe
    assert len(log) == len(set(log)) == res.probes <= 20  # one shared cache: no set launched twice


def test_cap_reports_suspects_and_is_inconclusive():
    res = find_all_culprits(24, masked_oracle(3, 17), max_probes=6)
    assert res.status == "budget" and res.probes == 6 and not res.complete and res.final_env is None
    assert 3 in res.suspects or any(3 in c for c in res.culprits)


def test_known_outcomes_are_free():
    a, b = 5, 11
    full = frozenset(range(24))
    known = {full - {a}: LATER, frozenset({a}): INIT, frozenset({b}): LATER, full - {a, b}: PASS}
    log = []
    res = find_all_culprits(24, masked_oracle(a, b, log), known=known)
    assert res.complete and not (set(log) & set(known))
    plain = find_all_culprits(24, masked_oracle(a, b))
    assert res.probes < plain.probes


def test_default_cap():
    assert default_max_probes(24) == 36 and default_max_probes(3) == 24


PROBE = """
import os, sys
# init failure masks the later one, as NCCL_NET=IB on a host without IB hides NCCL_ALGO=PAT
if os.environ.get("NCCL_NET") == "IB":
    print("NCCL WARN NET/IB : No device found.", flush=True); sys.exit(1)
if os.environ.get("NCCL_ALGO") == "PAT":
    print("NCCL WARN PAT algorithm unsupported", flush=True); sys.exit(1)
sys.exit(0)
"""


def _env_file(tmp_path, rng):
    lines = [f"export ENVMATRIX_H{i:02d}={rng.randint(1, 9)}\n" for i in range(22)] + ["export NCCL_NET=IB\n", "export NCCL_ALGO=PAT\n"]
    rng.shuffle(lines)
    path = tmp_path / "env.sh"
    path.write_text("".join(lines))
    return path


def _bisect_real(cli, tmp_path, probe, seed, *extra):
    """``envmatrix bisect`` of a shuffled 24-atom env file (seeded) with ``probe`` as the probe command; its report."""
    script = tmp_path / "probe.py"
    script.write_text(probe)
    env_file = _env_file(tmp_path, random.Random(seed))
    done = cli.run("bisect", "backend=gloo", "--grid", "1x1", "--env-file", str(env_file), "--probe-cmd", f"{sys.executable} {script}",
                   "--allow-unknown-vars", "--no-repair", *extra, "--json", str(tmp_path / "r.json"), "--out", str(tmp_path / "o"))
    if not (tmp_path / "r.json").exists():
        return done, None
    (report,) = json.loads((tmp_path / "r.json").read_text())
    return done, report


@pytest.mark.slow
def test_masking_with_real_probes(cli, tmp_path):
    done, report = _bisect_real(cli, tmp_path, PROBE, 7)
    assert done.returncode == 1, done.stdout + done.stderr
    assert [s["culprits"] for s in report["signatures"]] == [[["NCCL_NET=IB"]], [["NCCL_ALGO=PAT"]]]
    assert "NET/IB" in report["signatures"][0]["failure"]["line"] and "PAT" in report["signatures"][1]["failure"]["line"]
    assert report["complete"] and report["recommended_proven"] and report["status"] == "ok"
    assert not {"NCCL_NET=IB", "NCCL_ALGO=PAT"} & set(report["recommended_env"]) and len(report["recommended_env"]) == 22
    assert report["probes_launched"] <= 22
    launched = [ln for ln in done.stdout.splitlines() if "bisect-" in ln and "(stored, not launched)" not in ln]
    assert len(launched) == report["probes_launched"]
    md = (tmp_path / "o" / "bisect_env_1x1.md").read_text()
    assert "### Signature 1" in md and "### Signature 2" in md and "proven: this env passed a probe" in md


@pytest.mark.slow
def test_failing_baseline_with_real_probes_is_inconclusive(cli, tmp_path):
    # the baseline is launched lazily (a passing probe would prove it); a probe that always fails makes the
    # search launch it and stop: nothing to bisect, exit 3, no culprits
    always_fails = "import sys\nprint('NCCL WARN bootstrap: no route to host', flush=True)\nsys.exit(1)\n"
    done, report = _bisect_real(cli, tmp_path, always_fails, 9)
    assert done.returncode == 3, done.stdout + done.stderr
    assert report["status"] == "baseline fails" and not report["signatures"] and report["probes_launched"] <= 8
    assert report["trail"][-1]["atoms"] == "-"  # the baseline (no atom) was launched, last


@pytest.mark.slow
def test_cap_exit_3_with_real_probes(cli, tmp_path):
    done, report = _bisect_real(cli, tmp_path, PROBE, 8, "--max-probes", "5")
    assert done.returncode == 3, done.stdout + done.stderr
    assert report["status"] == "budget" and report["probes_launched"] == 5 and report["suspects"]
    assert "Probe cap reached" in (tmp_path / "o" / "bisect_env_1x1.md").read_text()


def test_bisect_help_documents_exit_codes(cli):
    out = cli.run("bisect", "--help").stdout
    assert "--max-probes" in out and "3 when inconclusive" in out.replace("\n", " ")


def test_gloo_ignoring_every_atom_is_bad_input(cli, tmp_path):
    env_file = tmp_path / "env.sh"
    env_file.write_text("export NCCL_ALGO=Ring\nexport NCCL_PROTO=Simple\n")
    out = tmp_path / "o"
    done = cli.run("bisect", "backend=gloo", "--grid", "1x2", "--env-file", str(env_file), "--out", str(out))
    assert done.returncode == 2 and "gloo" in done.stderr and not out.exists(), done.stdout + done.stderr


def test_nccl_echo_of_forced_variables_does_not_split_a_signature():
    from envmatrix.bisect.signature import normalize

    # the two lines the 2xH200 box printed for NCCL_ALGO=PAT with and without NCCL_PROTO=Simple in the env
    full = ("Error : no algorithm/protocol available for function AllReduce with datatype ncclFloat32. "
            "NCCL_ALGO was set to PAT. NCCL_PROTO was set to Simple.")
    alone = "Error : no algorithm/protocol available for function AllReduce with datatype ncclFloat32. NCCL_ALGO was set to PAT."
    assert normalize(full) == normalize(alone) == "error : no algorithm/protocol available for function allreduce with datatype ncclfloat#."
    assert stage(("init_error", normalize(full))) == 2
