"""The command line's edges, fixed: a Ctrl-C at any moment after envmatrix starts is exit 130 in one line (never a
SIGINT death or a traceback), and search.* keys refuse values of the wrong type (exit 2, nothing written)."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, assert_no_processes, describe_process, processes_with_marker, write_conf

# The driver runs envmatrix as `python -m envmatrix` does (itself run with -m: a script's SystemExit leaves through
# Py_Exit at once, so only -m ends by SIGINT on CPython's stale note), with one hook: a trace function that sends the
# signal at a chosen moment (signal.raise_signal: the handler runs at once, in the frame the trace function was called
# for).
_SIGNAL_AT = """
import runpy, signal, sys

HOW, WHEN, SIG = sys.argv.pop(1), sys.argv.pop(1), signal.Signals[sys.argv.pop(1)]


def due(frame):
    if WHEN == "importing":  # the command line's own imports, before main() installs its handler
        return frame.f_code.co_filename.endswith("/envmatrix/errors.py")
    if WHEN == "composing":  # Hydra composing the config
        return frame.f_code.co_name == "compose" and frame.f_code.co_filename.endswith("/hydra/compose.py")
    if WHEN == "restoring":  # main's finally, as it puts the handlers back: after its own try
        handler = getattr(signal.getsignal(SIG), "__name__", "")
        return frame.f_code.co_name == "restore" and handler == "_first_interrupt"
    # code exec'd from a string (a namedtuple's generated code) while build_parser imports the commands
    handler = getattr(signal.getsignal(SIG), "__name__", "")
    return frame.f_code.co_filename == "<string>" and handler == "_first_interrupt"


def trace(frame, event, arg):
    if event == "call" and due(frame):
        sys.settrace(None)
        if WHEN == "composing":  # the library takes the Ctrl-C and fails in its own words, as Hydra once did
            try:
                signal.raise_signal(SIG)
            except KeyboardInterrupt:
                from hydra.errors import ConfigCompositionException

                raise ConfigCompositionException("half-made by the interrupt") from None
        signal.raise_signal(SIG)
    return None


sys.settrace(trace)
sys.argv[0] = "envmatrix"
if HOW != "-m":  # what pip writes for pyproject's [project.scripts] envmatrix = "MODULE:FUNCTION"
    import importlib

    module, function = HOW.split(":")
    sys.exit(getattr(importlib.import_module(module), function)())
runpy.run_module("envmatrix", run_name="__main__", alter_sys=True)
"""


@pytest.fixture
def here(cli):
    cli.env["PYTHONPATH"] = str(REPO)  # this checkout, whatever an editable install elsewhere points at
    return cli


def _signalled(cli, tmp_path: Path, when: str, sig: str, *args: str, how: str = "-m") -> subprocess.CompletedProcess:
    (tmp_path / "signal_at.py").write_text(_SIGNAL_AT)
    env = {**cli.env, "PYTHONPATH": os.pathsep.join((str(tmp_path), cli.env["PYTHONPATH"]))}
    return subprocess.run([sys.executable, "-m", "signal_at", how, when, sig, *args], cwd=cli.cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def test_a_ctrl_c_that_lands_in_exec_d_code_still_exits_130_not_by_sigint(here, tmp_path):
    # CPython notes a KeyboardInterrupt leaving exec'd code as unhandled even though main() caught it, and ended the
    # process by SIGINT after the message (returncode -2; 1 in ~20 Ctrl-Cs 0.3-0.6 s into a sweep)
    done = _signalled(here, tmp_path, "exec", "SIGINT", "configs")
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert done.stderr == "envmatrix: interrupted\n"


@pytest.mark.parametrize("how", ["-m", "console-script"])
def test_a_ctrl_c_as_the_command_line_puts_its_handler_back_is_one_line_and_130(here, tmp_path, how):
    # CI run 88: a Ctrl-C at the end of `configs` (0.37 s) was a KeyboardInterrupt traceback and returncode -2: it
    # landed in main's finally, outside the try that answers it
    done = _signalled(here, tmp_path, "restoring", "SIGINT", "configs", how="-m" if how == "-m" else _console_script())
    assert (done.returncode, done.stderr) == (130, "envmatrix: interrupted\n"), (done.returncode, done.stderr)


def test_a_ctrl_c_a_library_answered_with_its_own_error_is_130_not_bad_input(here, tmp_path):
    # A sweep Ctrl-C'd 0.97 s in, under load, said 'c.yaml: defaults: a value of the wrong kind' and exited 2: Hydra
    # had lost the KeyboardInterrupt mid-compose and failed on its half-made config. Whatever error follows a
    # noted Ctrl-C is the interruption's.
    conf = write_conf(tmp_path / "c.yaml", "backend: gloo\ngrids: [1x2]\nsetups:\n  a: {}\n")
    done = _signalled(here, tmp_path, "composing", "SIGINT", "sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert done.stderr.startswith("envmatrix: interrupted; finished runs are in the store"), done.stderr
    assert len(done.stderr.splitlines()) == 1 and not (tmp_path / "o").exists()


def test_a_ctrl_c_python_wrapped_in_a_runtime_error_is_one_line_and_130(monkeypatch, capsys):
    # CI run 89: Python 3.11 re-raises a KeyboardInterrupt from a descriptor's __set_name__ (a dataclass field, while
    # a command module is imported) as "RuntimeError: Error calling __set_name__ on 'Field' instance 'meta' in
    # 'Setup'" from it: a traceback and exit 1. The run below raises exactly that (a signal cannot be aimed inside
    # __set_name__ from a trace hook: the hook's own frame takes it); any other RuntimeError stays an error.
    import envmatrix.cli as command_line

    def wrapped(argv, words):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__ on 'Field' instance 'meta' in 'Setup'") from exc

    monkeypatch.setattr(command_line, "_run", wrapped)
    assert command_line.main(["configs"]) == 130
    assert capsys.readouterr().err == "envmatrix: interrupted\n"

    def broken(argv, words):
        raise RuntimeError("a bug")

    monkeypatch.setattr(command_line, "_run", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        command_line.main(["configs"])


def _console_script() -> str:
    import tomllib

    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["envmatrix"]


@pytest.mark.parametrize("sig,line", [("SIGINT", "envmatrix: interrupted"),
                                      ("SIGTERM", "envmatrix: stopped by SIGTERM"),
                                      ("SIGHUP", "envmatrix: stopped by SIGHUP")])
@pytest.mark.parametrize("how", ["-m", "console-script"])
def test_a_signal_while_the_command_line_is_imported_is_one_line_and_130(here, tmp_path, sig, line, how):
    # before main() installs its handler: __main__'s, installed before any envmatrix module is imported; the console
    # script (what `pip install` puts on PATH) started at envmatrix.cli:main and had none: a KeyboardInterrupt traceback
    done = _signalled(here, tmp_path, "importing", sig, "configs", how="-m" if how == "-m" else _console_script())
    assert (done.returncode, done.stderr, done.stdout) == (130, line + "\n", "")


def _catches(pid: int, sig: int) -> bool:
    """Whether ``pid`` has a handler for ``sig`` (SigCgt in /proc/PID/status)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            mask = next(line.split()[1] for line in fh if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return True  # gone: nothing to wait for
    return bool(int(mask, 16) >> (sig - 1) & 1)


def _stderr_or_stacks(proc: subprocess.Popen, marker: str, timeout_s: float) -> str:
    """The stderr of ``proc`` once it ends; a failure naming where it hangs if it has not ended in ``timeout_s``
    (CI run 109: one sweep in 24 outlived its Ctrl-C by 120 s, and nothing said where it waited)."""
    try:
        return proc.communicate(timeout=timeout_s)[1]
    except subprocess.TimeoutExpired:
        pass
    held = [describe_process(pid) for pid in processes_with_marker(marker)]
    proc.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: every thread's stack goes to stderr before it dies
    try:
        err = proc.communicate(timeout=30)[1]
    except subprocess.TimeoutExpired:  # the driver is gone but a child holds its stderr open
        proc.kill()
        err = "(stderr held open by a child)"
    pytest.fail(f"no exit within {timeout_s} s of the signal; its processes: {held}; its threads:\n{err[-8000:]}")


@pytest.mark.slow
def test_ctrl_c_at_any_moment_of_a_sweep_exits_130_without_a_traceback(here, tmp_path):
    # Python's own start-up (site's .pth files) comes before envmatrix's entry and is out of its reach: there a
    # Ctrl-C is a 'Fatal Python error: init_import_site', or swallowed by a .pth's bare except (the sweep then ran to
    # its end, exit 0). So each signal waits, if it must, for __main__'s first line: its SIGTERM handler (Python
    # installs none of its own).
    conf = write_conf(tmp_path / "c.yaml",
                      "backend: gloo\ngrids: [1x2]\nsetups:\n  a: {TORCH_DISTRIBUTED_DEBUG: INFO}\n")
    here.env["PYTHONFAULTHANDLER"] = "1"
    late = []
    for delay in [0.05 + 0.75 * i / 11 for i in range(12)] * 2:
        proc = subprocess.Popen(here.argv("sweep", f"conf={conf}", "--out", str(tmp_path / "o")), cwd=here.cwd,
                                env=here.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        t0 = time.monotonic()
        time.sleep(delay)
        while not _catches(proc.pid, signal.SIGTERM):
            time.sleep(0.002)
        late.append(time.monotonic() - t0 - delay)
        proc.send_signal(signal.SIGINT)
        err = _stderr_or_stacks(proc, here.marker, timeout_s=120)
        assert proc.returncode == 130 and "Traceback" not in err, (delay, proc.returncode, err)
        assert len(err.strip().splitlines()) == 1, (delay, err)
    assert sum(wait > 0.01 for wait in late) <= len(late) // 3, f"most signals waited for start-up: {late}"
    assert_no_processes(here.marker)


SEARCH_CONF = """name: s1
backend: gloo
grids: [1x2]
probe: {timeout_s: 30}
search:
  trials: 1
  confirm_top_k: 0
  space: {TORCH_DISTRIBUTED_DEBUG: [OFF, INFO]}
"""


@pytest.mark.parametrize("override,key", [
    ("search.study_name=true", "search.study_name"), ("search.study_name=1.5", "search.study_name"),
    ("search.storage=5", "search.storage"), ("search.storage=true", "search.storage"),
    ("search.storage=[a]", "search.storage"), ("search.fixed=0", "search.fixed"),
    ("search.fixed=false", "search.fixed"), ("search.fixed=''", "search.fixed"),
])
def test_a_search_key_of_the_wrong_type_is_refused_in_one_line(here, tmp_path, override, key):
    conf = write_conf(tmp_path / "s.yaml", SEARCH_CONF)
    out = tmp_path / "o"
    done = here.run("search", f"conf={conf}", override, "--out", str(out), timeout=120)
    (line,) = done.stderr.strip().splitlines()
    value = override.split("=", 1)[1]
    # what is allowed, as the search: block says it ('allowed: ...', or 'expected a mapping VAR: value; got ...')
    assert done.returncode == 2 and key in line and ("allowed:" in line or "expected" in line), done.stderr
    assert value.strip("'[]").lower() in line.lower(), line
    assert not out.exists() and not (tmp_path / "reports").exists()


@pytest.mark.parametrize("override", ["search.study_name=my_study", "search.study_name=2024", "search.fixed={}",
                                      "search.storage=sqlite:///x.db"])
def test_search_keys_of_the_right_type_still_pass(here, tmp_path, override):
    conf = write_conf(tmp_path / "s.yaml", SEARCH_CONF)
    done = here.run("search", f"conf={conf}", override, "--dry-run", timeout=120)
    assert done.returncode == 0, done.stderr


def _memory_capped():
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # a reader without the cap fails here, not the box


@pytest.mark.parametrize("kind", ["/dev/zero", "a 65 MiB file"])
def test_a_launcher_hostfile_over_the_text_cap_is_refused_in_one_line(here, tmp_path, kind):
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun is not installed")
    hostfile = "/dev/zero"
    if kind != "/dev/zero":
        hostfile = str(tmp_path / "hosts")
        with open(hostfile, "wb") as fh:
            fh.truncate(65 << 20)  # sparse: no disk written
    conf = write_conf(tmp_path / "c.yaml", "backend: gloo\ngrids: [2x1]\nsetups:\n  a: {}\n")
    out = tmp_path / "o"
    done = subprocess.run(here.argv("sweep", f"conf={conf}", "launcher=mpirun",
                                    f"launcher_opts.mpirun.hostfile={hostfile}", "--out", str(out), "--dry-run"),
                          cwd=here.cwd, env=here.env, capture_output=True, text=True, timeout=60,
                          preexec_fn=_memory_capped)
    (line,) = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "launcher_opts.mpirun.hostfile" in line and hostfile in line, done.stderr
    assert "64 MiB" in line and not out.exists()
