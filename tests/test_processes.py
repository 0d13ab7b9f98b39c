"""Real processes with tiny workers that exit, crash or hang (torch elastic's api_test idea)."""

import os
import sys
import time
import uuid

import pytest

from envmatrix.boundary import ProcessSpec
from envmatrix.execution.processes import fork_call_in_group, run_capture, run_group

from conftest import assert_no_processes

PY = sys.executable


def _spec(tmp_path, code, label, marker):
    env = {**os.environ, "ENVMATRIX_TEST_MARKER": marker}
    return ProcessSpec((PY, "-c", code), env, str(tmp_path / f"{label}.log"), label)


def test_exit_codes_and_logs(tmp_path):
    marker = uuid.uuid4().hex
    out = run_group([_spec(tmp_path, "print('hello')", "a", marker), _spec(tmp_path, "import sys; sys.exit(0)", "b", marker)], timeout_s=30)
    assert [o.exit_code for o in out] == [0, 0]
    assert "hello" in (tmp_path / "a.log").read_text()


def test_crash_reports_signal(tmp_path):
    marker = uuid.uuid4().hex
    code = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    (out,) = run_group([_spec(tmp_path, code, "a", marker)], timeout_s=30)
    assert out.signal == "SIGSEGV" and out.exit_code is None and out.killed_by is None


@pytest.mark.slow
def test_hang_is_killed_at_timeout_with_grandchildren(tmp_path):
    marker = uuid.uuid4().hex
    code = "import subprocess, time; subprocess.Popen(['sleep', '600']); time.sleep(600)"
    t0 = time.monotonic()
    out = run_group([_spec(tmp_path, code, "a", marker), _spec(tmp_path, code, "b", marker)], timeout_s=2)
    assert time.monotonic() - t0 < 2 + 5
    assert {o.killed_by for o in out} == {"timeout"}
    assert all(o.signal == "SIGKILL" for o in out)
    assert_no_processes(marker)


def test_first_failure_stops_peers_after_grace(tmp_path):
    marker = uuid.uuid4().hex
    t0 = time.monotonic()
    out = run_group(
        [_spec(tmp_path, "import sys; sys.exit(7)", "bad", marker), _spec(tmp_path, "import time; time.sleep(600)", "peer", marker)],
        timeout_s=60,
        grace_s=0.5,
    )
    assert time.monotonic() - t0 < 10
    assert out[0].exit_code == 7 and out[0].killed_by is None
    assert out[1].killed_by == "peer_failure"
    assert out[0].ended_at <= out[1].ended_at
    assert_no_processes(marker)


def test_missing_executable_is_launch_error(tmp_path):
    spec = ProcessSpec(("/nonexistent/envmatrix-probe",), dict(os.environ), str(tmp_path / "x.log"), "x")
    (out,) = run_group([spec], timeout_s=5)
    assert out.launch_error and "No such file" in out.launch_error and out.pid is None


def test_shell_strings_are_refused(tmp_path):
    import pytest

    with pytest.raises(TypeError):
        run_capture("echo hi")


def test_run_capture_missing_tool():
    assert run_capture(["envmatrix-no-such-tool"]).returncode == 127


def _child_facts(path):
    """Runs inside the forked child: what it sees of its group, env (Python's and C's), cwd, stdin and PDEATHSIG."""
    import ctypes
    import json

    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    deathsig = ctypes.c_int(0)
    libc.prctl(2, ctypes.byref(deathsig), 0, 0, 0)  # PR_GET_PDEATHSIG
    facts = {"pgid": os.getpgid(0), "pid": os.getpid(), "env": dict(os.environ), "cwd": os.getcwd(),
             "c_getenv": (libc.getenv(b"NCCL_ALGO") or b"").decode(), "stdin": os.read(0, 100).decode(), "deathsig": deathsig.value}
    with open(path, "w") as fh:
        json.dump(facts, fh)
    os.write(1, b"to the log\n")  # fds, not sys.stdout: pytest's capture replaces the Python objects
    return 7


def test_fork_call_in_group_gives_the_child_its_group_env_log_and_death_signal(tmp_path):
    import json
    import signal

    facts_path, log = tmp_path / "facts.json", tmp_path / "child.log"
    pid = fork_call_in_group(lambda: _child_facts(str(facts_path)), {"NCCL_ALGO": "Tree", "ONLY": "this"},
                             str(log), str(tmp_path), "test child")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 7
    facts = json.loads(facts_path.read_text())
    assert facts["pgid"] == facts["pid"] == pid  # its own group: a timeout kills it with what it started
    assert facts["env"] == {"NCCL_ALGO": "Tree", "ONLY": "this"}  # whole replacement: nothing of ours leaks
    assert facts["c_getenv"] == "Tree"  # NCCL reads the env through C getenv
    assert facts["cwd"] == str(tmp_path) and facts["stdin"] == ""
    assert facts["deathsig"] == signal.SIGKILL
    assert log.read_text() == "to the log\n"


def test_fork_call_in_group_turns_an_exception_into_exit_1_and_one_log_line(tmp_path):
    log = tmp_path / "child.log"

    def boom():
        raise RuntimeError("no NCCL here")

    pid = fork_call_in_group(boom, {}, str(log), None, "envmatrix pooled child")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 1
    assert log.read_text() == "envmatrix pooled child: RuntimeError: no NCCL here\n"


def test_the_kill_reaches_children_in_sessions_of_their_own(tmp_path):
    # torchrun starts its workers with start_new_session: neither the group nor the session kill reaches them,
    # and once their parent is dead they are re-parented to init (CI run 14's left-behind shims)
    import subprocess
    import sys

    from conftest import assert_no_processes
    from envmatrix.execution.processes import kill_tree

    marker = "own-session-" + tmp_path.name
    ready = tmp_path / "ready"
    code = ("import subprocess, sys, time; subprocess.Popen(['sleep', '300'], start_new_session=True); "
            f"open({str(ready)!r}, 'w').close(); time.sleep(300)")
    parent = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "ENVMATRIX_TEST_MARKER": marker},
                              start_new_session=True)
    deadline = time.time() + 60
    while not ready.exists() and time.time() < deadline:
        time.sleep(0.05)
    assert ready.exists()
    kill_tree(parent.pid)
    parent.wait(timeout=10)
    assert_no_processes(marker, wait_s=5)


def test_ctrl_c_while_a_rank_is_being_started_still_kills_it_and_its_children(tmp_path):
    # CI run 19: SIGINT landed while Popen of rank 1 waited for its exec; the rank was started but never recorded,
    # so the cleanup did not kill its group, and its grandchild outlived the sweep. The start below is the real
    # Popen; the interrupt is sent from inside it, once the rank's grandchild exists.
    import signal

    import pytest

    from envmatrix.execution.processes import popen_spec

    marker = "ctrl-c-in-start-" + tmp_path.name
    ready = tmp_path / "ready"
    code = (f"import subprocess, time; subprocess.Popen(['sleep', '300']); open({str(ready)!r}, 'w').close(); "
            "time.sleep(300)")

    def start_then_ctrl_c(spec, log):
        proc = popen_spec(spec, log)
        deadline = time.time() + 60
        while not ready.exists() and time.time() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)  # pytest's own handler raises KeyboardInterrupt
        time.sleep(0.5)  # where the interrupt lands without the deferral: inside the start
        return proc

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever an earlier test left installed
    try:
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            run_group([_spec(tmp_path, code, "rank0", marker)], timeout_s=60, start=start_then_ctrl_c)
        assert time.monotonic() - started < 30, "the interrupt was held until the run's timeout"
    finally:
        signal.signal(signal.SIGINT, previous)
    assert ready.exists()
    assert_no_processes(marker, wait_s=5)
