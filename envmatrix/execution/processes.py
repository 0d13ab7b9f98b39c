"""The one module that starts processes.

Every child runs in its own session (so a timeout kills its whole process
group, grandchildren included) and gets PR_SET_PDEATHSIG, so a driver killed
with SIGKILL does not leave ranks running. Always ``shell=False``.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from envmatrix import interrupts
from envmatrix.boundary import RESULT_DIR_VAR, ProcessOutcome, ProcessSpec

_PR_SET_PDEATHSIG = 1
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _prctl = None


def _child_setup() -> None:
    # Runs between fork and exec: keep it to async-signal-safe calls.
    os.setsid()
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


@dataclass(frozen=True)
class Captured:
    returncode: int
    stdout: str
    stderr: str


def run_capture(argv: Sequence[str], timeout_s: float = 20.0, env: Mapping[str, str] | None = None) -> Captured:
    """Run a short host query (nvidia-smi, ldconfig); never raises for a missing tool."""
    if isinstance(argv, str):
        raise TypeError("argv must be a list, never a shell string")
    try:
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=None if env is None else dict(env),
            shell=False,
            check=False,
        )
    except FileNotFoundError as exc:
        return Captured(127, "", str(exc))
    except subprocess.TimeoutExpired:
        return Captured(124, "", f"{argv[0]} did not answer within {timeout_s}s")
    return Captured(done.returncode, done.stdout, done.stderr)


def popen_spec(spec: ProcessSpec, log: Any) -> subprocess.Popen:
    return subprocess.Popen(
        list(spec.argv),
        env=dict(spec.env),
        cwd=spec.cwd,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        shell=False,
        preexec_fn=_child_setup,
    )


def popen_piped(argv: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen:
    """A long-lived helper the driver talks to over unbuffered stdin/stdout pipes (the warm pool's servers):
    its own process group, dies with the thread that started it, stderr discarded."""
    return subprocess.Popen(
        list(argv), env=dict(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        shell=False, preexec_fn=_child_setup, bufsize=0,
    )


def signal_name(number: int) -> str:
    """SIGTERM for 15; a real-time signal, which has no name of its own, as SIG34."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def _signal_name(returncode: int) -> Optional[str]:
    return signal_name(-returncode) if returncode < 0 else None


def kill_tree(pid: int) -> None:
    kill_trees([pid])


def kill_trees(pids: Sequence[int]) -> None:
    """SIGKILL each pid with its group, session and every descendant, all of them before any is reaped: ended one
    tree after another, a rank under a launcher not yet killed saw its peers under the first one die, failed of it
    and reported that failure of its own (CI run 90, torchrun agents at a timeout; 43dc906 read it back)."""
    if not pids:
        return
    # Read the trees first: torchrun starts its workers in sessions of their own, and once it dies they are
    # re-parented to init, out of reach of the group and session kills (a worker still starting has not yet
    # armed its own death signal).
    trees = _descendants(pids)
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for tree, _ in trees:
        for member in tree:
            try:
                os.kill(member, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    _kill_sessions(set(pids))
    # A member's own child that outlived its parent (re-parented to init before the tree was read, or forked
    # between the read and the kill) is in no tree any more but still in the session or group that member
    # leads: CI run 54 left a torchrun worker's `sleep` behind this way.
    leaders = {leader for _, led in trees for leader in led}
    if leaders:
        _kill_led_by(leaders)


def _descendants(pids: Sequence[int]) -> list[tuple[list[int], list[int]]]:
    """Per pid, every process below it (children, their children ...), from one pass over /proc's parent links; and
    those of them that lead a session or a process group other than this process's own (torchrun's workers, mpirun's
    ranks)."""
    children: dict[int, list[int]] = {}
    leads: set[int] = set()
    mine = (os.getsid(0), os.getpgid(0))
    for child, fields in _proc_stats():
        try:
            children.setdefault(int(fields[1]), []).append(child)  # stat field 4: ppid
            group, session = int(fields[2]), int(fields[3])  # stat fields 5, 6
        except (IndexError, ValueError):
            continue
        if child in (group, session) and child not in mine:
            leads.add(child)
    out = []
    for pid in pids:
        found, todo = [], list(children.get(pid, []))
        while todo:
            member = todo.pop()
            found.append(member)
            todo.extend(children.get(member, []))
        out.append((found, [member for member in found if member in leads]))
    return out


def _proc_stats() -> Iterator[tuple[int, list[bytes]]]:
    """(pid, the /proc/PID/stat fields after the command name) of every process still readable; none off Linux."""
    try:
        entries = os.listdir("/proc")
    except OSError:  # not Linux
        return
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                yield int(entry), fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue


def _kill_sessions(sids: set[int]) -> None:
    """SIGKILL what is left in the children's sessions: mpirun puts ranks in process groups of their own,
    and a rank still starting when mpirun dies misses its death signal. The kernel keeps a session
    id from being reused while any member lives, so this never reaches an unrelated process."""
    for pid, fields in _proc_stats():
        try:
            if int(fields[3]) in sids:  # stat field 6: session id
                os.kill(pid, signal.SIGKILL)
        except (OSError, IndexError, ValueError):
            continue


def _kill_led_by(leaders: set[int]) -> None:
    """SIGKILL every process in a session or process group one of ``leaders`` leads (one pass over /proc).
    The kernel reuses no pid while a session or group of that id has a member: only a process that made itself a
    leader of a new one under a just-freed id, in this instant, could be caught unrelated."""
    for pid, fields in _proc_stats():
        try:
            if int(fields[2]) in leaders or int(fields[3]) in leaders:  # stat fields 5, 6: group, session
                os.kill(pid, signal.SIGKILL)
        except (OSError, IndexError, ValueError):
            continue


def boot_ticks() -> int:
    """Now, in the clock ticks since boot that /proc/PID/stat's start time is counted in."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))


def run_markers(specs: Sequence[ProcessSpec]) -> list[frozenset[bytes]]:
    """What every process a run starts carries in its environment: its result directory (``ENVMATRIX_RESULT_DIR``,
    the rank env's own or, for a launcher process that passes it on to its ranks, the directory it starts in)."""
    dirs = {spec.env.get(RESULT_DIR_VAR) or spec.cwd for spec in specs} - {None, ""}
    return [frozenset({f"{RESULT_DIR_VAR}={d}".encode()}) for d in sorted(dirs)]


def kill_strays(since_ticks: int, markers: Sequence[frozenset[bytes]], passes: int = 3) -> list[int]:
    """SIGKILL every process started at or after ``since_ticks`` (``boot_ticks``) whose environment holds all the
    entries of one of ``markers``; the pids killed. For what left the trees, sessions and groups ``kill_tree``
    reaches: a daemon (fork, setsid, fork) a rank started is re-parented to init in a session of its own, and a
    rank that exited cleanly left it running after the probe. A process that cleared its environment escapes."""
    killed: list[int] = []
    if not markers:
        return killed
    me = os.getpid()
    for _ in range(passes):  # a stray forking as it is killed: its child is new in the next pass
        found = []
        for pid, fields in _proc_stats():
            try:
                if pid == me or pid in killed or int(fields[19]) < since_ticks:  # stat field 22: start time
                    continue
                with open(f"/proc/{pid}/environ", "rb") as fh:
                    env = set(fh.read().split(b"\0"))
            except (OSError, IndexError, ValueError):
                continue
            if any(marker <= env for marker in markers):
                found.append(pid)
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                continue
            killed.append(pid)
        if not found:
            break
    return killed


class _Sentinel:
    """The driver's sentinel (execution/sentinel.py), started with the first run: told of each run under way, it
    kills what the run's ranks started (``kill_strays``) once the driver is gone without its own cleanup (SIGKILL:
    the ranks die of their death signal, a grandchild that ignores SIGTERM ran on)."""

    def __init__(self) -> None:
        self._proc: Optional[subprocess.Popen] = None
        self._lock = threading.Lock()
        self._count = 0

    def watch(self, since_ticks: int, markers: Sequence[frozenset[bytes]]) -> Optional[int]:
        if not markers:
            return None
        with self._lock:
            self._count += 1
            token = self._count
        self._say({"add": token, "since": since_ticks,
                   "markers": [sorted(entry.decode("latin-1") for entry in marker) for marker in markers]})
        return token

    def done(self, token: Optional[int]) -> None:
        if token is not None:
            self._say({"done": token})

    def _say(self, msg: dict) -> None:
        with self._lock:
            try:
                if self._proc is None or self._proc.poll() is not None:
                    self._proc = self._start()
                self._proc.stdin.write((json.dumps(msg) + "\n").encode())  # type: ignore[union-attr]
                self._proc.stdin.flush()  # type: ignore[union-attr]
            except (OSError, ValueError):  # no sentinel: the driver's own cleanup still runs
                pass

    @staticmethod
    def _start() -> subprocess.Popen:
        # Not a child that dies with the driver (no death signal: it must outlive it), in a session of its own (no
        # kill of a run reaches it), with an env of its own (it is no rank: none of the run's variables).
        package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR") if k in os.environ}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (package_parent, os.environ.get("PYTHONPATH"))))
        return subprocess.Popen([sys.executable, "-m", "envmatrix.execution.sentinel"], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, shell=False,
                                start_new_session=True)


_SENTINEL = _Sentinel()


def send_signal(pids: Sequence[int], sig: int) -> None:
    """``sig`` to each process itself (not its group: a launcher forwards it to its ranks)."""
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def children_of(pids: Sequence[int]) -> list[int]:
    """Direct children of ``pids`` (from /proc), for launchers that do not forward signals to their ranks."""
    wanted = set(pids)
    return [pid for pid, fields in _proc_stats() if len(fields) > 1 and int(fields[1]) in wanted]  # field 4: ppid


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Ctrl-C (or SIGTERM, SIGHUP: interrupts.SIGNALS) waits until the block is done: a process whose start (or
    reap) it interrupted would be known to nobody, and no cleanup would kill its group (CI run 19: a rank
    interrupted inside Popen outlived the sweep and left its grandchild). Afterwards the handler that was installed
    before gets the signal."""
    if threading.current_thread() is not threading.main_thread():
        yield  # Python delivers signals to the main thread only
        return
    caught: list[int] = []
    previous = interrupts.install(lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        interrupts.restore(previous)
        if caught:
            _deliver(caught[0], previous[caught[0]])


def _deliver(signum: int, handler: Any) -> None:
    # A Python handler is called here, synchronously: a re-sent signal is handled at some later bytecode, which
    # may be inside a finalizer, where CPython prints and drops the KeyboardInterrupt (CI run 23: the Ctrl-C
    # deferred during a rank's start was lost and the run went on to its timeout).
    if callable(handler):
        handler(signum, None)
    elif handler != signal.SIG_IGN:
        os.kill(os.getpid(), signum)


def exit_fd(proc: Any, opened: dict[int, int]) -> Optional[int]:
    """A descriptor that turns readable when ``proc`` ends: its own ``exit_fd()`` (a warm pool's child: the server's
    pipe, which carries the exit status), else a pidfd (Linux >= 5.3, opened once into ``opened``); None: poll only."""
    own = getattr(proc, "exit_fd", None)
    if own is not None:
        return own()
    if proc.pid not in opened:
        try:
            opened[proc.pid] = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):  # no pidfd here, or the process is gone already (poll tells)
            opened[proc.pid] = -1
    return opened[proc.pid] if opened[proc.pid] >= 0 else None


def wait_for_an_exit(procs: Sequence[Any], timeout_s: float, opened: dict[int, int]) -> None:
    """Sleep until one of ``procs`` ends or ``timeout_s`` passes: a run's verdict is read the moment its ranks
    exit instead of at the next poll tick (~25 ms a run at a 50 ms tick, the warm pool's runs take ~60 ms)."""
    fds = [exit_fd(p, opened) for p in procs]
    if not fds or any(fd is None for fd in fds):
        time.sleep(timeout_s)
        return
    select.select(fds, [], [], max(0.0, timeout_s))


def run_group(
    specs: Sequence[ProcessSpec],
    timeout_s: float,
    grace_s: float = 5.0,
    poll_s: float = 0.05,
    start: Optional[Callable[[ProcessSpec, Any], Any]] = None,
    on_timeout: Optional[Callable[[list[int]], None]] = None,
    interruptible: bool = True,
) -> list[ProcessOutcome]:
    """Start all specs, wait, and return one outcome per spec.

    The first non-zero exit starts a grace period; then the rest are killed
    (``peer_failure``), because their peers will never answer. At the
    deadline everything still running is killed (``timeout``), after
    ``on_timeout(pids still running)`` has had its say (the hang diagnosis
    asks for stacks then). ``start`` (default Popen) may return any object with Popen's pid/poll/wait, e.g.
    a warm pool's forked child. ``interruptible=False``: a Ctrl-C does not end the group (from a worker thread),
    for processes the caller ends itself and that must not die mid-undo (the network holds).
    """
    procs: list[Any] = []
    outcomes: list[Optional[ProcessOutcome]] = []
    log_files = []
    pidfds: dict[int, int] = {}
    since = boot_ticks() - 1  # a tick's rounding: a rank started in this tick still counts
    markers = run_markers(specs)
    watched = _SENTINEL.watch(since, markers)  # should the driver die without the cleanup below
    try:
        for spec in specs:
            if isinstance(spec.argv, str):
                raise TypeError("argv must be a sequence, never a shell string")
            log = open(spec.log_path, "ab", buffering=0)
            log_files.append(log)
            with deferred_interrupt():  # started and recorded, or not started: never started and unknown
                try:
                    proc = (start or popen_spec)(spec, log)
                except (OSError, ValueError) as exc:
                    procs.append(None)
                    outcomes.append(
                        ProcessOutcome(spec.label, None, None, None, None, time.time(), launch_error=f"{type(exc).__name__}: {exc}")
                    )
                    log.write(f"envmatrix: could not start {spec.argv[0]!r}: {exc}\n".encode())
                    continue
                procs.append(proc)
                outcomes.append(None)

        deadline = time.monotonic() + timeout_s
        peer_deadline: Optional[float] = None
        if any(o is not None and o.launch_error for o in outcomes):
            peer_deadline = time.monotonic()
        while any(o is None for o in outcomes):
            if interruptible:
                interrupts.raise_pending()  # a Ctrl-C whose KeyboardInterrupt a finalizer swallowed, or in a worker thread
            now = time.monotonic()
            for i, proc in enumerate(procs):
                if outcomes[i] is not None or proc is None:
                    continue
                with deferred_interrupt():  # reaped means its group was killed too (the cleanup skips reaped ones)
                    rc = proc.poll()
                    if rc is None:
                        continue
                    kill_tree(proc.pid)  # grandchildren left in the group
                outcomes[i] = ProcessOutcome(specs[i].label, proc.pid, rc if rc >= 0 else None, _signal_name(rc), None, time.time())
                if rc != 0 and peer_deadline is None:
                    peer_deadline = now + grace_s
            reason = None
            if now >= deadline:
                reason = "timeout"
            elif peer_deadline is not None and now >= peer_deadline:
                reason = "peer_failure"
            if reason:
                left = [i for i, proc in enumerate(procs) if outcomes[i] is None and proc is not None]
                if reason == "timeout" and on_timeout is not None:
                    on_timeout([procs[i].pid for i in left])
                kill_trees([procs[i].pid for i in left])
                for i in left:
                    rc = procs[i].wait()
                    outcomes[i] = ProcessOutcome(
                        specs[i].label, procs[i].pid, rc if rc >= 0 else None, _signal_name(rc), reason, time.time()
                    )
                break
            running = [p for i, p in enumerate(procs) if outcomes[i] is None and p is not None]
            if not running:  # the last one was just reaped: waiting would only sleep a tick (50 ms of every run)
                continue
            wait_for_an_exit(running, min(poll_s, deadline - now, (peer_deadline or deadline) - now), pidfds)
        return [o for o in outcomes if o is not None]
    finally:
        # Also the Ctrl-C path: kill every group first, then reap, so a sweep stops in one pass. Only
        # unreaped children: a reaped one was cleaned up when reaped, and its pid may belong to another by now.
        live = [proc for proc in procs if proc is not None and proc.returncode is None]
        kill_trees([proc.pid for proc in live])
        for proc in live:
            proc.wait()
        kill_strays(since, markers)  # daemons the ranks left, outside every tree and session above
        _SENTINEL.done(watched)
        for log in log_files:
            log.close()
        for fd in pidfds.values():
            if fd >= 0:
                os.close(fd)


def fork_exec_in_group(argv: Sequence[str], env: Mapping[str, str], log_fd: int, on_error: str,
                       default_signals: Sequence[int] = ()) -> int:
    """Start argv as a child in a process group of its own that dies with its parent (PDEATHSIG SIGKILL),
    stdout/stderr to ``log_fd``; returns its pid. For a rank-side supervisor (the launcher shim) that must
    kill the probe's whole group; ``on_error`` prefixes the one line written when argv cannot run.
    ``default_signals``: signals the parent ignores that the child must not inherit ignored (exec keeps SIG_IGN)."""
    if isinstance(argv, str):
        raise TypeError("argv must be a sequence, never a shell string")
    child = os.fork()
    if child == 0:
        try:
            for sig in default_signals:
                signal.signal(sig, signal.SIG_DFL)
            os.setpgid(0, 0)
            if _prctl is not None:
                _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            os.dup2(log_fd, 1)
            os.dup2(log_fd, 2)
            os.close(log_fd)
            os.execvpe(argv[0], list(argv), dict(env))
        except OSError as exc:
            os.write(2, f"{on_error}: cannot run {argv[0]!r}: {exc}\n".encode())
        os._exit(127)
    return child



@dataclass
class WaitingChild:
    """A child forked ahead of its run (``fork_waiting_call``): it waits for its request on ``request_fd`` and, once
    ``call`` has returned, writes its exit code to ``result_fd`` before it exits."""

    pid: int
    request_fd: int  # the parent's end: ``start`` writes the request here and closes it; closed unwritten = discard
    result_fd: int  # the parent's end: b"CODE\n" once the call returned, EOF alone when the child died first

    def start(self, request: Mapping[str, Any]) -> None:
        """Hand the child its run: ``env`` (taken whole), ``log_path``, ``cwd`` and what ``call`` reads."""
        data = (json.dumps(request) + "\n").encode()
        try:
            while data:
                data = data[os.write(self.request_fd, data):]
        finally:
            os.close(self.request_fd)
            self.request_fd = -1

    def prepared(self, timeout_s: float) -> bool:
        """Whether the ``prepare`` it was forked with succeeded, waiting at most ``timeout_s`` for it to finish (not
        finished: False); only for a child forked with one."""
        line, deadline = b"", time.monotonic() + timeout_s
        while not line.endswith(b"\n"):
            if not select.select([self.result_fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                return False
            chunk = os.read(self.result_fd, 1)  # one byte at a time: what follows is the run's code
            if not chunk:
                return False
            line += chunk
        return line == b"1\n"

    def discard(self) -> None:
        """Let an unused child go: it reads EOF and exits 0 (the caller reaps it)."""
        if self.request_fd >= 0:
            os.close(self.request_fd)
            self.request_fd = -1


def fork_waiting_call(call: Callable[[dict], int], on_error: str,
                      prepare: Optional[Callable[[], bool]] = None) -> WaitingChild:
    """Fork now a child that will run ``call(request)`` once the parent sends its request (``WaitingChild.start``):
    for a server that already imported what the child needs (the warm pool: torch), so the fork is off the run's
    critical path. At once the child gets a process group of its own (the driver kills it on timeout), dies with its
    parent (PDEATHSIG SIGKILL) and lets go of the parent's stdin/stdout; it touches nothing else until its request
    comes. Then stdin is /dev/null, stdout/stderr are appended to the request's ``log_path``, and the request's ``env``
    replaces the environment whole (putenv reaches C getenv, so NCCL reads it) before ``call`` runs, which may touch
    CUDA/NCCL. When ``call`` returns, its code goes to the result pipe before the process exits, so the parent can
    report the result while the kernel still tears the process down (a CUDA context: ~0.15 s). An exception writes
    one line prefixed ``on_error`` and exits 1; the child never returns into the parent's code. The parent sets the
    group too, so no kill aimed at the group can miss the child. ``prepare``: run in the child before it waits, its
    success said first on the result pipe (``WaitingChild.prepared``); the caller decides whether a request may
    use what it prepared."""
    request_r, request_w = os.pipe()
    result_r, result_w = os.pipe()
    child = os.fork()
    if child == 0:
        code = 1
        try:
            os.close(request_w)
            os.close(result_r)
            os.setpgid(0, 0)
            if _prctl is None:
                raise OSError("prctl(PR_SET_PDEATHSIG) is not available (not Linux)")
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)  # the parent's stdout may be a protocol pipe: not for a waiting child to hold
            if prepare is not None:
                try:
                    ready = bool(prepare())
                except Exception:  # noqa: BLE001 - said as not prepared: the caller discards this child
                    ready = False
                os.write(result_w, b"1\n" if ready else b"0\n")
            raw = b""
            while not raw.endswith(b"\n"):
                chunk = os.read(request_r, 65536)
                if not chunk:
                    os._exit(0)  # discarded before it ran anything
                raw += chunk
            os.close(request_r)
            request = json.loads(raw)
            log = os.open(request["log_path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.dup2(log, 1)
            os.dup2(log, 2)
            if request.get("cwd"):
                os.chdir(request["cwd"])
            # Whole replacement, so nothing of the parent's env leaks.
            os.environ.clear()
            os.environ.update(request["env"])
            code = call(request)
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException as exc:  # noqa: BLE001 - the child must never return into the parent's loop
            try:
                os.write(2, f"{on_error}: {type(exc).__name__}: {exc}\n".encode())
            except OSError:
                pass
            code = 1
        try:
            os.write(result_w, f"{code}\n".encode())
        except OSError:  # nobody listens (the parent is gone): the exit status still says it
            pass
        os._exit(code)
    os.close(request_r)
    os.close(result_w)
    try:
        os.setpgid(child, child)
    except OSError:
        pass
    return WaitingChild(child, request_w, result_r)


def exec_replace(argv: Sequence[str]) -> None:
    """Replace this process with argv (PATH searched); for an entry point that has prepared the process first
    (``envmatrix.execution.netns_enter``: namespaces, hostname). Returns only by raising OSError."""
    if isinstance(argv, str):
        raise TypeError("argv must be a sequence, never a shell string")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvp(argv[0], list(argv))
