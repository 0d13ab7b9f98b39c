"""``bench --pairs`` bad inputs from a user's side (QA pass): a flag the pair test does not use is refused in one line
naming it, exit 2, nothing written; never silently ignored, never refused after the run directory exists."""

import pytest


@pytest.mark.slow  # a CLI start per row: 1 s idle, over 4 s on the loaded 2-core CI box
@pytest.mark.parametrize("args,text", [
    # taken and ignored before (exit 0, a full host pair run)
    (["--pairs", "hosts", "--grid", "2x1", "--gpu-pairs", "0-1"], "--gpu-pairs 0-1: only with --pairs gpus"),
    (["--pairs", "hosts", "--grid", "2x1", "--setup", "baseline,no_p2p"], "--pairs hosts measures one setup"),
    (["--pairs", "hosts", "--grid", "2x1", "-b", "1K"], "-b/--min-bytes: not with --pairs hosts"),
    (["--pairs", "hosts", "--grid", "2x1", "-e", "1M"], "-e/--max-bytes: not with --pairs hosts"),
    (["--pairs", "hosts", "--grid", "2x1", "-i", "4"], "-i/--step-bytes: not with --pairs hosts"),
    (["--pairs", "hosts", "--grid", "2x1", "--timing", "graph"], "--timing: not with --pairs hosts"),
    (["--pairs", "hosts", "--grid", "2x1", "--no-check"], "--no-check: not with --pairs hosts"),
    (["--pairs", "hosts", "--grid", "2x1", "--inflight", "0"], "--inflight: not with --pairs hosts"),
    (["--pairs", "gpus", "--iperf-seconds", "3"], "--iperf-seconds 3: only with --pairs hosts"),
    # --peers: a group twice ran once without a word (-c refuses a collective twice); empty said "'empty' not allowed"
    (["--grid", "2x2", "--peers", "rail,rail"], "--peers 'rail,rail': 'rail' is listed twice"),
    (["--grid", "2x2", "--peers", ","], "--peers ',': names no peer group"),
    # host lists: HOST:SLOTS in hosts: passed as a host (mpirun --host node0:2:1, MASTER_ADDR=node0:2: the ranks hung
    # until the probe timeout); one host said "no hosts"; a grid beyond the hosts was refused after the run directory
    (["launcher=mpirun", "hosts=[node0:2,node1:2]", "--pairs", "hosts"], "'node0:2' is HOST:SLOTS, not a host"),
    (["launcher=mpirun", "hosts=[node0]", "--pairs", "hosts"], "hosts: [node0] is one host; allowed: 2 or more"),
    (["launcher=mpirun", "hosts=[ha,hb]", "--pairs", "hosts", "--grid", "3x1"], "3x1 needs 3 hosts but 2 are given"),
    # refused after the run directory was made, under the probe's key ('bench --pairs.bench.iters')
    (["--pairs", "hosts", "--grid", "2x1", "-n", "0"], "-n/--iters: 0 is out of range"),
    (["--pairs", "hosts", "--grid", "2x1", "-w", "-1"], "-w/--warmup: -1 is out of range"),
    (["--pairs", "hosts", "--grid", "2x1", "-d", "float64"], "-d/--dtype: 'float64' not allowed"),
    (["--pairs", "hosts", "--grid", "2x1", "--timeout", "-5"], "--timeout: -5.0 is not a duration > 0"),
])
def test_pair_flags_are_refused_in_one_line_writing_nothing(cli, tmp_path, args, text):
    done = cli.run("bench", "backend=gloo", *args, "--out", str(tmp_path / "o"))
    assert done.returncode == 2, (args, done.stdout[-2000:], done.stderr)
    assert text in done.stderr and len(done.stderr.strip().splitlines()) == 1, (args, done.stderr)
    assert not (tmp_path / "o").exists()
