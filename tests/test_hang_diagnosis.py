"""Hang diagnosis: real gloo ranks where one rank stops before a collective; the driver collects every
rank's Python stack before it kills the run, and names the rank, its host and the collective."""

import json
import shutil

import pytest

from conftest import assert_no_processes, write_conf

pytestmark = pytest.mark.slow

HANG_CONF = """
name: hang
backend: gloo
launcher: {launcher}
grids: [2x2]
setups: {{plain: {{}}}}
probe:
  timeout_s: {timeout}
  collectives: [allreduce, allgather]
  stall: {{rank: 1, seq: 2}}
"""


def _hang_run(cli, tmp_path, launcher, timeout):
    conf = write_conf(tmp_path / "hang.yaml", HANG_CONF.format(launcher=launcher, timeout=timeout))
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    assert done.returncode == 1, done.stderr + done.stdout
    (result,) = json.loads((tmp_path / "o" / "results.json").read_text())["results"]
    assert_no_processes(cli.marker)
    return result, done.stdout


def _check_diagnosis(result, stdout):
    assert result["outcome"] == "timeout"
    host = result["ranks"][1]["hostname"]
    line = result["hang"]["line"]
    # rank 1 stopped before its 2nd collective (allgather); the others passed allreduce and wait in allgather
    assert line.startswith(f"rank 1 on host {host} stuck outside any collective at rank/main.py:"), line
    assert "in stall_here, before allgather (seq 2)" in line and "ranks 0,2-3 wait in allgather (seq 2)" in line, line
    assert result["root_cause"]["line"] == line and line in stdout
    assert (result["root_cause"]["rank"], result["root_cause"]["host"]) == (1, host)  # the culprit, not rank 0
    ranks = result["hang"]["ranks"]
    assert set(ranks) == {"0", "1", "2", "3"}
    for r in ("0", "2", "3"):  # a real faulthandler dump taken inside torch.distributed's all_gather
        assert ranks[r]["collective"] == "allgather" and "in all_gather" in ranks[r]["stack"], ranks[r]
    assert "in stall_here" in ranks["1"]["stack"] and ranks["1"]["collective"] is None
    # the stacks were taken from live ranks: every rank was still running and was killed at the timeout after it
    assert all(r["killed_by"] == "timeout" for r in result["ranks"]), [r["killed_by"] for r in result["ranks"]]


def test_local_launcher_hang_names_the_stalled_rank(cli, tmp_path):
    result, stdout = _hang_run(cli, tmp_path, "local", 30)
    _check_diagnosis(result, stdout)


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="OpenMPI mpirun not installed (.ci/run installs openmpi-bin)")
def test_mpirun_forwards_the_stack_request_to_its_ranks(cli, tmp_path):
    result, stdout = _hang_run(cli, tmp_path, "mpirun", 30)
    _check_diagnosis(result, stdout)
    assert result["hang"]["signalled_directly"] == []  # every stack came through mpirun and the shims


def test_torchrun_agent_is_spared_and_its_ranks_answer(cli, tmp_path):
    """torchrun's agent would die of SIGUSR1: its children (the shims) get it and pass it to the probes."""
    result, stdout = _hang_run(cli, tmp_path, "torchrun", 60)  # cold starts: no warm pool under torchrun
    _check_diagnosis(result, stdout)


def test_ranks_waiting_on_an_async_handle_still_name_the_stalled_rank(cli, tmp_path):
    """NCCL's behaviour on gloo: every collective is called with async_op=True and the rank blocks in work.wait(),
    outside torch.distributed (as a GPU rank blocks in its next CUDA op). The ranks past the call carry the launched
    mark and wait in allgather; rank 1, which never called it, is still the culprit."""
    conf = write_conf(tmp_path / "hang.yaml", HANG_CONF.format(launcher="local", timeout=30) + "  async_op: true\n")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    assert done.returncode == 1, done.stderr + done.stdout
    (result,) = json.loads((tmp_path / "o" / "results.json").read_text())["results"]
    assert_no_processes(cli.marker)
    assert result["outcome"] == "timeout"
    line = result["hang"]["line"]
    assert line.startswith(f"rank 1 on host {result['ranks'][1]['hostname']} stuck outside any collective at rank/main.py:"), line
    assert "in stall_here, before allgather (seq 2)" in line and "ranks 0,2-3 wait in allgather (seq 2)" in line, line
    ranks = result["hang"]["ranks"]
    for r in ("0", "2", "3"):  # blocked in the Work handle's wait, called from the probe's own code
        assert ranks[r]["collective"] is None and ranks[r]["frame"].endswith("in run_checks"), ranks[r]
        assert "torch/distributed" not in ranks[r]["stack"].split("Current thread")[-1] and ranks[r]["progress"]["launched"] is True
    assert "in stall_here" in ranks["1"]["stack"] and "launched" not in ranks["1"]["progress"]


def test_a_rank_that_never_joins_the_rendezvous_is_named_at_a_short_timeout(cli, tmp_path):
    """probe.stall seq 0: rank 1 stops before init_process_group; with an 8 s timeout the run is a timeout (torch's
    own rendezvous timeout is 2 x timeout_s + grace_s, rank.main.torch_timeout_s) and the line names rank 1.
    The race that made such runs init_errors (a pooled rank waiting before the driver's deadline starts) is not
    reproduced here: test_hang_parsing pins the timeout's margin."""
    conf = write_conf(tmp_path / "h.yaml", "backend: gloo\ngrids: [1x2]\nsetups: {plain: {}}\n"
                      "probe: {timeout_s: 8, collectives: [allreduce], stall: {rank: 1, seq: 0}}\n")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    assert done.returncode == 1, done.stderr + done.stdout
    (result,) = json.loads((tmp_path / "o" / "results.json").read_text())["results"]
    assert_no_processes(cli.marker)
    assert result["outcome"] == "timeout", result["root_cause"]
    assert [r["killed_by"] for r in result["ranks"]] == ["timeout", "timeout"]
    line = result["hang"]["line"]
    import socket

    assert result["ranks"][1]["hostname"] == socket.gethostname()  # from the launch slot: the rank never reported its identity
    assert line.startswith(f"rank 1 on host {socket.gethostname()} stuck outside any collective at rank/main.py:"), line
    assert line.endswith("in stall_here; rank 0 wait in init_process_group (rendezvous)"), line


def test_passing_run_records_where_each_rank_ran(cli, tmp_path):
    conf = write_conf(tmp_path / "ok.yaml", "backend: gloo\ngrids: [2x2]\nsetups: {plain: {}}\nprobe: {timeout_s: 60, collectives: [allreduce]}\n")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr + done.stdout
    (result,) = json.loads((tmp_path / "o" / "results.json").read_text())["results"]
    import socket

    assert [(r["node"], r["local_rank"]) for r in result["ranks"]] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for r in result["ranks"]:
        assert r["hostname"] == socket.gethostname() and r["gpu_uuid"] == "cpu" and r["pci_bus_id"] == "cpu"
        assert r["nic"] == "lo" and r["nic_source"] == "GLOO_SOCKET_IFNAME"  # the local launcher pins gloo to lo
        assert r["progress"]["collective"] == "allreduce" and r["progress"]["seq"] == 1
    assert result["hang"] == {}
    # reports group by host: console table and matrix.md
    assert "hosts (every rank record" in done.stdout
    assert f"| {socket.gethostname()} | 1 | 4 | 0 | 0 | cpu | lo |" in (tmp_path / "o" / "matrix.md").read_text()
    assert_no_processes(cli.marker)


def test_bench_hang_names_collective_and_size(cli, tmp_path):
    """Markers count the checks, the bench's warm-ups (1K, 2K, 4K: seq 2-4) and then every (collective, size) of
    the bench: seq 6 is allreduce's window at 4 KiB."""
    conf = write_conf(tmp_path / "b.yaml", """
backend: gloo
grids: [1x2]
setups: {plain: {}}
probe:
  timeout_s: 30
  collectives: [allreduce]
  bench: {collectives: [allreduce], min_bytes: 1K, max_bytes: 4K, factor: 4, iters: 2, warmup: 1}
  stall: {rank: 1, seq: 6}
""")
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    assert done.returncode == 1, done.stderr + done.stdout
    (result,) = json.loads((tmp_path / "o" / "results.json").read_text())["results"]
    line = result["root_cause"]["line"]
    assert line.endswith("in stall_here, before allreduce@4096 (seq 6); rank 0 wait in allreduce@4096 (seq 6)"), line
    assert_no_processes(cli.marker)
