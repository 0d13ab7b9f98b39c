"""A plain sweep (no bench) under a rate too low for the probe's own check to cross within its timeout is refused up
front, as a bench already was: at 1 kbit the 16 KiB allreduce/allgather/alltoall need 262 s against a 120 s timeout,
so every cell could only time out, read as the setup's failure."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def _sweep(tmp_path, *args):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "envmatrix", "sweep", "backend=gloo", "grids=[2x1]", "--out", str(out),
                           *args], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    return proc, out


def test_plain_probe_payload_past_the_timeout_is_refused(tmp_path):
    proc, out = _sweep(tmp_path, "--network", "slow:rate=1kbit")
    assert proc.returncode == 2, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if "error:" in x]
    assert "network slow (rate=1kbit)" in line and "probe's check" in line and "needs at least 262 s" in line
    assert "probe.numel" in line and not out.exists()


def test_smaller_numel_or_longer_timeout_lifts_it(tmp_path):
    for extra in (["probe.numel=256"], ["probe.timeout_s=400"]):
        proc, out = _sweep(tmp_path, "--network", "slow:rate=1kbit", *extra)
        # what refuses it then is only that the local launcher's ranks share loopback
        assert proc.returncode == 2 and "needs at least" not in proc.stderr and "never crosses a link" in proc.stderr
        assert not out.exists()
