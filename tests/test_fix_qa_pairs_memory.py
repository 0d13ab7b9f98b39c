"""bench --pairs hosts --pair-size 1T on emulated hosts: the ranks were launched and each failed to allocate the
message (DefaultCPUAllocator: can't allocate memory, exit 1, a run directory written). bench refuses such sizes
before anything starts (check_cpu_memory); the pair test now does too: one line, exit 2, nothing written."""

import subprocess
import sys


def test_a_pair_size_beyond_this_hosts_memory_is_refused_before_launch(tmp_path):
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "envmatrix", "bench", "backend=gloo", "--pairs", "hosts", "--grid", "2x1",
                           "--pair-size", "1T", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1 and "GiB of buffers" in done.stderr, done.stderr
    assert "MiB (--pair-size) or fewer ranks" in done.stderr, done.stderr  # it named bench -e, a flag --pairs refuses
    assert not out.exists()
