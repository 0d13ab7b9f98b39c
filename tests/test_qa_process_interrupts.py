"""QA of Ctrl-C and SIGTERM to the driver while a probe runs, for bisect and bench (sweep and search have their own:
test_sigint, test_qa_search_interrupt): exit 130 at once, every rank and grandchild gone, finished probes kept."""

from __future__ import annotations

import signal
import sqlite3
import sys
import time

import pytest

from conftest import assert_no_processes, processes_with_marker

pytestmark = pytest.mark.slow

# The whole env fails at once (stored); a probe without QA_A hangs with a grandchild that ignores SIGTERM.
PROBE = """import os, subprocess, sys, time
subprocess.Popen([sys.executable, '-c', 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)'])
if os.environ.get('QA_BAD') == '1':
    sys.exit(1) if os.environ.get('QA_A') else time.sleep(300)
"""


def _interrupt(cli, args, sig, started) -> tuple[int, str]:
    driver = cli.popen(*args)
    deadline = time.monotonic() + 120
    seen = False  # asked once per look: a condition can hold for a moment and be gone at the next look
    while not seen and time.monotonic() < deadline:
        seen = started()
        time.sleep(0 if seen else 0.1)
    if not seen:
        driver.kill()
        out, _ = driver.communicate()
        raise AssertionError(f"the probe to interrupt never started; the driver ({driver.returncode}) said: {out[-3000:]}")
    sent = time.monotonic()
    driver.send_signal(sig)
    try:
        out, _ = driver.communicate(timeout=30)
    except Exception:
        driver.kill()
        out, _ = driver.communicate()
        raise AssertionError(f"the driver did not stop: {out[-2000:]}")
    assert time.monotonic() - sent < 10, out
    return driver.returncode, out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl_c", "sigterm"])
def test_bisect_interrupted_in_a_hanging_probe_exits_130_keeps_its_finished_probe_and_leaves_nothing(cli, tmp_path, sig):
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "bad.env").write_text("export QA_A=1\nexport QA_BAD=1\nexport QA_C=2\n")
    out = tmp_path / "o"

    def hanging() -> bool:  # both ranks of a probe that hangs (QA_BAD without QA_A) run probe.py; by then the whole
        # env's probe has failed and is stored (it runs first). Counting any two probe.py ranks also counted a passing
        # probe's for the moment they ran: the signal then came between probes (CI run 85 and 1 in 12 runs here)
        return sum(_runs_probe(pid) and _hangs(pid) for pid in processes_with_marker(cli.marker)) >= 2

    code, text = _interrupt(cli, ("bisect", "backend=gloo", "--grid", "1x2", "--env-file", str(tmp_path / "bad.env"),
                                  "--allow-unknown-vars", "--probe-cmd", f"{sys.executable} {tmp_path / 'probe.py'}",
                                  "--out", str(out), "probe.timeout_s=300"), sig, hanging)
    assert code == 130 and "resume with: envmatrix bisect" in text, text
    with sqlite3.connect(out / "results.sqlite") as db:
        outcomes = [row[0] for row in db.execute("select outcome from results")]
    assert "exit_error" in outcomes, outcomes  # the probe that finished before the interrupt
    assert_no_processes(cli.marker)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl_c", "sigterm"])
def test_bench_interrupted_while_measuring_exits_130_and_leaves_nothing(cli, tmp_path, sig):
    out = tmp_path / "o"

    def measuring() -> bool:  # both ranks report from inside the run (their phase files), then a moment into it
        reports = list(out.glob("logs/*/*/rank[01].json"))
        return len(reports) == 2 and time.sleep(1.5) is None

    code, text = _interrupt(cli, ("bench", "backend=gloo", "--grid", "1x2", "-b", "1M", "-e", "512M", "-n", "20",
                                  "--out", str(out)), sig, measuring)
    assert code == 130 and "resume with: envmatrix bench" in text, text
    assert_no_processes(cli.marker)


def _runs_probe(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().endswith(b"probe.py\0")
    except OSError:
        return False


def _hangs(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = set(fh.read().split(b"\0"))
    except OSError:
        return False
    return b"QA_BAD=1" in env and b"QA_A=1" not in env
