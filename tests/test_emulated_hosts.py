"""Emulated hosts (issue 38) through the real CLI: real gloo ranks on CPU, placed by planning/placement.py; one
GPU test (skipped without a GPU) runs real NCCL ranks sharing one GPU as two emulated hosts."""

import functools
import json
import os
import shutil
import subprocess

import pytest

from conftest import write_conf
from envmatrix.results import ProbeResult

pytestmark = pytest.mark.slow

GLOO = """
name: emulated
backend: gloo
grids: [1x2, 2x1, 2x2]
setups:
  ok: {TORCH_DISTRIBUTED_DEBUG: INFO}
  bad: {TORCH_DISTRIBUTED_DEBUG: INFO, GLOO_SOCKET_IFNAME: envmx_missing0}
probe:
  timeout_s: 60
  collectives: [allreduce, allgather]
"""


def _results(out):
    return [ProbeResult.from_json(r) for r in json.loads((out / "results.json").read_text())["results"]]


def test_emulated_hosts_on_gloo_record_their_host_ids_hostnames_and_placement(cli, tmp_path):
    conf = write_conf(tmp_path / "emu.yaml", GLOO)
    out = tmp_path / "run"
    done = cli.run("sweep", f"conf={conf}", "--emulate-hosts", "--out", str(out))
    assert done.returncode == 1, done.stdout + done.stderr  # the bad setup fails: exit 1
    results = {(r.grid, r.setup_name): r for r in _results(out)}
    ok = results[("2x2", "ok")]
    assert ok.passed and ok.placement["kind"] == "cpu" and ok.placement["emulated_hosts"] == ["emh0", "emh1"]
    assert [(k.rank, k.hostname) for k in ok.ranks] == [(0, "emh0"), (1, "emh0"), (2, "emh1"), (3, "emh1")]
    # each emulated node its own NCCL host id, as NCCL would hash them; one node needs none
    assert [k.env.get("NCCL_HOSTID") for k in ok.ranks] == ["envmatrix-node0"] * 2 + ["envmatrix-node1"] * 2
    assert {k.env.get("NCCL_HOSTID") for k in results[("1x2", "ok")].ranks} == {None}
    assert {k.hostname for k in results[("1x2", "ok")].ranks} == {"emh0"}
    bad = results[("2x1", "bad")]
    assert not bad.passed and bad.root_cause.get("host") in ("emh0", "emh1")
    matrix = (out / "matrix.md").read_text()
    assert "## Placement (emulated hosts)" in matrix and "| 2x2 | cpu (4 ranks) | emh0, emh1 |" in matrix


def test_without_emulate_hosts_ranks_keep_the_machines_name(cli, tmp_path):
    conf = write_conf(tmp_path / "emu.yaml", GLOO.replace("[1x2, 2x1, 2x2]", "[2x1]").split("  bad:")[0]
                      + "probe:\n  timeout_s: 60\n  collectives: [allreduce]\n")
    out = tmp_path / "run"
    done = cli.run("sweep", f"conf={conf}", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    (result,) = _results(out)
    assert {k.hostname for k in result.ranks} == {result.host["hostname"]}
    assert result.placement["emulated_hosts"] == [] and result.placement["label"] == "cpu (2 ranks)"
    assert [k.env.get("NCCL_HOSTID") for k in result.ranks] == ["envmatrix-node0", "envmatrix-node1"]  # as before
    assert "## Placement (emulated hosts)" not in (out / "matrix.md").read_text()


def test_bisect_failing_2x2_runs_on_emulated_hosts(cli, tmp_path):
    conf = write_conf(tmp_path / "emu.yaml", GLOO.replace("[1x2, 2x1, 2x2]", "[2x2]"))
    out = tmp_path / "run"
    assert cli.run("sweep", f"conf={conf}", "--emulate-hosts", "--out", str(out)).returncode == 1
    done = cli.run("bisect", f"conf={conf}", "--failing", "2x2", "--emulate-hosts", "--out", str(out),
                   "--json", str(tmp_path / "b.json"))
    assert done.returncode == 1, done.stdout + done.stderr  # culprits found
    assert "GLOO_SOCKET_IFNAME" in done.stdout
    probes = [r for r in _results(out) if r.grid == "2x2"]
    assert probes and all(r.placement.get("emulated_hosts") == ["emh0", "emh1"] for r in probes)


def test_emulate_hosts_is_refused_for_a_launcher_that_places_ranks_itself(cli, tmp_path):
    conf = write_conf(tmp_path / "emu.yaml", GLOO)
    done = cli.run("sweep", f"conf={conf}", "launcher=mpirun", "--emulate-hosts", "--dry-run")
    assert done.returncode == 2 and "--emulate-hosts" in done.stderr and "launcher=local" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def _one_gpu(cli, tmp_path, mode: str, memory_mib: int) -> None:
    """This host shows one GPU in ``mode`` with ``memory_mib``: an nvidia-smi on PATH printing what the real one
    prints for both queries envmatrix makes (the parsers are tested on recorded text in test_placement.py)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(
        "#!/bin/sh\ncase \"$1\" in\n"
        f"  --query-gpu=compute_mode,memory.total) echo '{mode}, {memory_mib} MiB' ;;\n"
        "  --query-gpu=*) echo '0, NVIDIA H100 80GB HBM3, 570.00, 00000000:18:00.0' ;;\n"
        "  *) exit 0 ;;\nesac\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    cli.env["PATH"] = f"{bin_dir}:{cli.env['PATH']}"


NCCL_ONE_GPU = """
name: emulated_refusals
backend: nccl
grids: [1x1, 2x2]
setups:
  ok: {}
"""


@pytest.mark.parametrize("mode,memory_mib,extra,line", [
    ("Exclusive_Process", 81559, (), "grids: 2x2 shares GPU 0 among 4 ranks but its compute mode is Exclusive_Process"),
    ("Default", 8192, ("probe.bench.max_bytes=1G",),
     "grids: 2x2 puts 4 ranks on GPU 0 needing about 19.0 GiB (4.75 GiB each: CUDA context, NCCL and probe buffers) "
     "but it has 8.0 GiB; allowed: at most 1 ranks per GPU"),
])
def test_shared_gpu_refusals_are_one_line_exit_2_and_write_nothing(cli, tmp_path, mode, memory_mib, extra, line):
    _one_gpu(cli, tmp_path, mode, memory_mib)
    conf = write_conf(tmp_path / "nccl.yaml", NCCL_ONE_GPU)
    out = tmp_path / "out"
    done = cli.run("sweep", f"conf={conf}", *extra, "--emulate-hosts", "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and line in done.stderr, done.stderr
    assert not out.exists()
    # the same GPU takes the grid when it fits: the plan is made (dry run), nothing refused
    fits = cli.run("sweep", f"conf={conf}", "--emulate-hosts", "--dry-run", "--out", str(out))
    assert (fits.returncode == 0) == (mode == "Default"), fits.stdout + fits.stderr


SEARCH_ONE_GPU = """
name: emulated_search
backend: nccl
grids: [2x1]
probe:
  bench: {collectives: [allreduce], min_bytes: 1M, max_bytes: 4M}
search:
  trials: 2
  space: {NCCL_ALGO: [Ring, Tree]}
  objective: {collectives: [allreduce], size: 4M}
"""


def test_search_on_shared_gpus_is_refused_unless_its_figures_are_allowed(cli, tmp_path):
    _one_gpu(cli, tmp_path, "Default", 81559)
    conf = write_conf(tmp_path / "search.yaml", SEARCH_ONE_GPU)
    done = cli.run("search", f"conf={conf}", "--emulate-hosts", "--dry-run")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "grids 2x1 would share GPUs as emulated hosts" in done.stderr and "search.allow_shared_gpu_figures=true" in done.stderr
    allowed = cli.run("search", f"conf={conf}", "--emulate-hosts", "search.allow_shared_gpu_figures=true", "--dry-run")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr


NAMESPACES = """
name: emulated_ns
backend: gloo
grids: [2x1]
launcher_opts:
  local:
    emulate_hosts: {namespaces: true}
setups:
  ok: {}
probe:
  timeout_s: 60
  collectives: [allreduce, allgather]
"""


@functools.lru_cache(maxsize=None)
def _namespaces_here() -> str:
    from envmatrix.cluster.emulated import unavailable_reason

    return unavailable_reason() or ""


@pytest.mark.skipif(bool(_namespaces_here()), reason=_namespaces_here() or "namespaces available")
def test_each_emulated_host_in_its_own_network_namespace(cli, tmp_path):
    from envmatrix.network.netlink import namespaces

    conf = write_conf(tmp_path / "ns.yaml", NAMESPACES)
    out = tmp_path / "run"
    done = cli.run("sweep", f"conf={conf}", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    (result,) = _results(out)
    # each rank started inside its host's namespace, named as its emulated host, talking over that host's eth0
    made = [argv[argv.index("envmatrix.execution.netns_enter") + 1] for argv in result.argv]
    assert len(set(made)) == 2 and [argv[argv.index("--hostname") + 1] for argv in result.argv] == ["emh0", "emh1"]
    assert [(k.hostname, k.nic) for k in result.ranks] == [("emh0", "eth0"), ("emh1", "eth0")]
    master = {k.env.get("MASTER_ADDR") for k in result.ranks} - {None}
    assert not master or not master & {"127.0.0.1", "localhost"}
    assert not set(made) & set(namespaces()), "the session's namespaces outlived it"


def _gpus() -> int:
    if not shutil.which("nvidia-smi"):
        return 0
    done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    listed = done.stdout.count("GPU ") if done.returncode == 0 else 0
    # nvidia-smi lists every GPU of the host; the ranks see only CUDA_VISIBLE_DEVICES's (one on a two-GPU box)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return listed if visible is None else min(listed, len([d for d in visible.split(",") if d.strip()]))


NCCL_2X1 = """
name: emulated_nccl
backend: nccl
grids: [1x1, 2x1]
setups:
  ok: {}
  pat: {NCCL_ALGO: PAT}   # no PAT AllReduce: fails once NCCL sees two hosts; a one-rank communicator runs no algorithm
probe:
  timeout_s: 90
  nccl_debug: INFO
"""


@pytest.mark.skipif(_gpus() != 1, reason="needs exactly one visible GPU (nvidia-smi, CUDA_VISIBLE_DEVICES): 2x1 must share it; "
                    "run by benchmarks/emulated_hosts_gpu.sh's box or any one-GPU host")
def test_two_emulated_hosts_share_one_gpu_with_real_nccl(cli, tmp_path):
    conf = write_conf(tmp_path / "nccl.yaml", NCCL_2X1)
    out = tmp_path / "run"
    done = cli.run("sweep", f"conf={conf}", "--emulate-hosts", "--out", str(out), timeout=400)
    assert done.returncode == 1, done.stdout + done.stderr
    results = {(r.grid, r.setup_name): r for r in _results(out)}
    ok = results[("2x1", "ok")]
    assert ok.passed and ok.shared_gpu and ok.placement["label"] == "shared-gpu (2 ranks on 1 GPU)"
    assert "NET" in (ok.nccl.get("transport") or "")  # the two emulated hosts talk through NCCL's NET transport
    assert [k.hostname for k in ok.ranks] == ["emh0", "emh1"] and len({k.gpu_uuid for k in ok.ranks}) == 1
    assert results[("1x1", "pat")].passed and not results[("2x1", "pat")].passed  # fails only across hosts
    assert "| 2x1 | shared-gpu (2 ranks on 1 GPU) | emh0, emh1 |" in (out / "matrix.md").read_text()
