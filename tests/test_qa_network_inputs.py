"""Bad network-condition inputs as a user types them: one line, exit 2, nothing written (held-out QA)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _bench(tmp_path, *args):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "envmatrix", "bench", "backend=gloo", "--grid", "2x1", "-c", "p2p",
                           "--out", str(out), *args], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    return proc, out


@pytest.mark.slow
def test_a_rate_too_low_for_the_payload_to_cross_within_the_timeout_is_refused_up_front(tmp_path):
    # 1M..4M p2p, 3 rounds at 10 kbit is at least 17616 s: the run could only time out, read as the setup's failure
    proc, out = _bench(tmp_path, "-b", "1M", "-e", "4M", "-n", "2", "-w", "1", "--timeout", "60",
                       "--network", "slow:rate=10kbit")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "network slow (rate=10kbit)" in line and "needs at least 17616 s" in line and "timeout is 60 s" in line
    assert "allowed:" in line and not out.exists()


@pytest.mark.slow
def test_a_rate_whose_payload_fits_the_timeout_is_not_refused_for_it(tmp_path):
    # 64K once at 10 kbit: 52 s of floor within 60 s; what refuses it here is only that the local launcher's
    # ranks share loopback
    proc, out = _bench(tmp_path, "-b", "64K", "-e", "64K", "-n", "1", "-w", "0", "--timeout", "60",
                       "--network", "slow:rate=10kbit")
    assert proc.returncode == 2 and "needs at least" not in proc.stderr and "never crosses a link" in proc.stderr
    assert not out.exists()
