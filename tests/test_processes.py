"""Real processes with tiny workers that exit, crash or hang (torch elastic's api_test idea)."""

import os
import sys
import time
import uuid

import pytest

from envmatrix.boundary import ProcessSpec
from envmatrix.execution.processes import fork_waiting_call, run_capture, run_group

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


def _result(child):
    raw = b""
    while chunk := os.read(child.result_fd, 64):
        raw += chunk
    os.close(child.result_fd)
    _, status = os.waitpid(child.pid, 0)
    return raw, os.waitstatus_to_exitcode(status)


def test_fork_waiting_call_gives_the_child_its_group_env_log_and_death_signal_once_its_request_comes(tmp_path):
    import json
    import signal

    facts_path, log = tmp_path / "facts.json", tmp_path / "child.log"
    # the parent's env carries a variable the request does not: it must not reach the child
    os.environ["ENVMATRIX_TEST_PARENT_ONLY"] = "1"
    try:
        child = fork_waiting_call(lambda request: _child_facts(request["facts"]), "test child")
    finally:
        del os.environ["ENVMATRIX_TEST_PARENT_ONLY"]
    time.sleep(0.2)
    assert not facts_path.exists()  # forked ahead: it waits for its request and runs nothing before
    child.start({"env": {"NCCL_ALGO": "Tree", "ONLY": "this"}, "log_path": str(log), "cwd": str(tmp_path),
                 "facts": str(facts_path)})
    raw, code = _result(child)
    assert raw == b"7\n" and code == 7  # the code is reported on the result pipe before the process ends
    facts = json.loads(facts_path.read_text())
    assert facts["pgid"] == facts["pid"] == child.pid  # its own group: a timeout kills it with what it started
    assert facts["env"] == {"NCCL_ALGO": "Tree", "ONLY": "this"}  # whole replacement: nothing of ours leaks
    assert facts["c_getenv"] == "Tree"  # NCCL reads the env through C getenv
    assert facts["cwd"] == str(tmp_path) and facts["stdin"] == ""
    assert facts["deathsig"] == signal.SIGKILL
    assert log.read_text() == "to the log\n"


def test_fork_waiting_call_turns_an_exception_into_exit_1_and_one_log_line(tmp_path):
    log = tmp_path / "child.log"

    def boom(request):
        raise RuntimeError("no NCCL here")

    child = fork_waiting_call(boom, "envmatrix pooled child")
    child.start({"env": {}, "log_path": str(log)})
    assert _result(child) == (b"1\n", 1)
    assert log.read_text() == "envmatrix pooled child: RuntimeError: no NCCL here\n"


def test_a_discarded_waiting_child_exits_without_running_and_a_killed_one_reports_nothing(tmp_path):
    ran = tmp_path / "ran"
    child = fork_waiting_call(lambda request: open(ran, "w").close() or 0, "test child")
    child.discard()
    assert _result(child) == (b"", 0) and not ran.exists()
    child = fork_waiting_call(lambda request: time.sleep(60) or 0, "test child")
    child.start({"env": {}, "log_path": str(tmp_path / "log")})
    os.kill(child.pid, 9)
    assert _result(child) == (b"", -9)  # no code on the pipe: the parent takes the signal from the exit status


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


def test_the_kill_reaches_an_orphan_in_a_workers_session(tmp_path):
    # CI run 54: a torchrun worker (a session of its own) had a child that outlived its direct parent, so it was in
    # no tree when the cleanup read one (re-parented to init), nor in the launcher's group or session
    import subprocess
    import sys
    import uuid

    from conftest import assert_no_processes, processes_with_marker
    from envmatrix.execution.processes import kill_tree

    marker = f"orphan-in-session-{uuid.uuid4().hex}"
    ready = tmp_path / "ready"
    orphan = "import os, time\nif os.fork() == 0: time.sleep(300)"  # the middle process exits at once
    worker = (f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {orphan!r}]).wait(); "
              f"open({str(ready)!r}, 'w').close(); time.sleep(300)")
    launcher = (f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {worker!r}], "
                "start_new_session=True); time.sleep(300)")
    parent = subprocess.Popen([sys.executable, "-c", launcher], env={**os.environ, "ENVMATRIX_TEST_MARKER": marker},
                              start_new_session=True)
    try:
        deadline = time.time() + 60
        while not ready.exists() and time.time() < deadline:
            time.sleep(0.05)
        assert ready.exists() and len(processes_with_marker(marker)) == 3  # launcher, worker, orphan
        kill_tree(parent.pid)
        parent.wait(timeout=10)
        assert_no_processes(marker, wait_s=5)
    finally:
        for pid in processes_with_marker(marker):  # what a failed assertion above would leave
            os.kill(pid, 9)


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


def test_a_waiting_child_says_whether_it_prepared_before_it_takes_its_request(tmp_path):
    for outcome, said in ((True, True), (False, False), (RuntimeError("no GPU"), False)):
        def prepare(outcome=outcome):
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

        child = fork_waiting_call(lambda request: 5, "test child", prepare)
        assert child.prepared(30) is said
        child.start({"env": {}, "log_path": str(tmp_path / "log")})
        assert _result(child) == (b"5\n", 5)  # the code still follows on the same pipe
    slow = fork_waiting_call(lambda request: 0, "test child", lambda: time.sleep(60) or True)
    t0 = time.monotonic()
    assert slow.prepared(0.5) is False and time.monotonic() - t0 < 5  # a prepare that does not finish: not used
    os.kill(slow.pid, 9)
    assert _result(slow) == (b"", -9)


def test_a_noted_ctrl_c_ends_an_interruptible_group_only(tmp_path):
    """A Ctrl-C noted (interrupts.note) ends the group at its next step, killing it; ``interruptible=False`` lets
    the group finish as its processes end themselves (the network holds undo their shaping when told to stop)."""
    from envmatrix import interrupts

    marker = uuid.uuid4().hex
    code = "import time; time.sleep(1.5); print('ended by itself')"
    interrupts.note()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_group([_spec(tmp_path, code, "killed", marker)], timeout_s=30)
        (out,) = run_group([_spec(tmp_path, code, "kept", marker)], timeout_s=30, interruptible=False)
    finally:
        interrupts.clear()
    assert out.exit_code == 0 and "ended by itself" in (tmp_path / "kept.log").read_text()
    assert "ended by itself" not in (tmp_path / "killed.log").read_text()
    assert_no_processes(marker)
