"""The launcher contract every launcher passes (optuna's StorageTestCase / hydra's LauncherTestSuite idea).

tests/contracts/test_launcher_contract.py runs it for every registered launcher, with that launcher's
:data:`TRAITS`: ``fake`` (where the real binary is not installed, a tiny stand-in placed first on PATH that
spawns the ranks locally with the launcher's identity variables and forwards only the env the launcher's
flags name), exit-code/signal behaviour and identity variables.

Parts: plan -> argv/env (pure, golden files), rank identity, env delivery (real processes), timeout kill
(no child left behind), exit-code mapping.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import stat
import sys
import uuid
from pathlib import Path
from typing import Any, Optional

import pytest

from conftest import assert_no_processes
from envmatrix.env import Atom, Setup
from envmatrix.env.atoms import PREPEND, UNSET
from envmatrix.engine.launch import execute
from envmatrix.launchers import LaunchContext, get_launcher
from envmatrix.launchers.shim import derive_rank_env
from envmatrix.planning import Grid, plan_runs
from envmatrix.probes import get_probe

GOLDEN = Path(__file__).resolve().parent / "golden"
REGOLD = os.environ.get("ENVMATRIX_REGOLD") == "1"
WEIRD = 'a b "dq" \'sq\' $HOME; ls && echo x\nsecond line'
INHERITED = {"PATH": "/usr/bin:/bin", "HOME": "/home/u", "NCCL_NVLS_ENABLE": "0"}
PINS = {"NCCL_NVLS_ENABLE": "0"}
WORKDIR = "/w/run dir"


def weird_setup() -> Setup:
    return Setup("weird", (
        Atom("NCCL_ALGO", value="Tree"),
        Atom("ENVMATRIX_WEIRD", value=WEIRD),
        Atom("NCCL_IB_HCA", value="mlx5_0,mlx5_1"),
        Atom("LD_LIBRARY_PATH", op=PREPEND, value="/opt/lib dir"),
        Atom("NCCL_DEBUG", op=UNSET),
    ))


def fixed_key(run: Any) -> Any:
    """Golden plans must not change when an unrelated probe default changes the run key."""
    import dataclasses

    return dataclasses.replace(run, key="0123456789abcdef")


def golden_ctx(port: int = 29555) -> LaunchContext:
    return LaunchContext(
        workdir=WORKDIR, inherited_env=INHERITED, pins=PINS,
        rank_argv=("/opt/py/bin/python", "-m", "envmatrix.rank.main"),
        probe_env={"ENVMATRIX_PROBE": '{"collectives": ["allreduce"], "timeout_s": 60}'}, port=port, gpus=0,
    )


def plan_record(plan: Any) -> dict[str, Any]:
    """What a golden file pins: argv, env added to the inherited one, rank -> process and logs."""
    return {
        "processes": [
            {"argv": list(p.argv), "env_added": {k: v for k, v in sorted(p.env.items()) if INHERITED.get(k) != v},
             "log": os.path.basename(p.log_path)}
            for p in plan.processes
        ],
        "process_of_rank": list(plan.process_of_rank or range(len(plan.slots))),
        "rank_logs": [[os.path.basename(p) for p in plan.logs_of(s.rank)] for s in plan.slots],
        "intended_rank0": {k: v for k, v in sorted(plan.intended_env[0].items()) if INHERITED.get(k) != v},
    }


def check_golden(name: str, record: dict[str, Any]) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(record, indent=1, sort_keys=True) + "\n"
    if REGOLD or not path.exists():
        path.write_text(text)
        if not REGOLD:
            pytest.fail(f"golden file {path} was missing and has been written; check it in and rerun")
        return
    assert path.read_text() == text, (
        f"{path.name} differs from the plan built now; if the change is intended, regenerate with: "
        f"ENVMATRIX_REGOLD=1 python -m pytest -q -p no:cacheprovider tests/test_launchers_*.py"
    )


FAKE = r'''#!__PYTHON__
"""Fake __NAME__ for tests: spawns ranks locally like the real one, forwarding only the env its flags name."""
import os, signal, subprocess, sys, time
name = os.path.basename(sys.argv[0])
args = sys.argv[1:]
world, ppn, extra, cmd = 1, None, {}, []
drop = set(filter(None, os.environ.get("FAKE_LAUNCHER_DROP", "").split(",")))
i = 0
while i < len(args):
    a = args[i]
    if not a.startswith("-"):
        cmd = args[i:]
        break
    if name == "srun":
        if a.startswith("--ntasks="):
            world = int(a.split("=", 1)[1])
        elif a.startswith("--ntasks-per-node="):
            ppn = int(a.split("=", 1)[1])
        elif a.startswith("--export="):
            for item in a.split("=", 1)[1].split(","):
                if item == "ALL":
                    continue
                k, eq, v = item.partition("=")
                extra[k] = v if eq else os.environ.get(k, "")
    else:
        if a == "-n":
            world = int(args[i + 1]); i += 1
        elif a in ("--ppn", "-ppn"):
            ppn = int(args[i + 1]); i += 1
        elif a in ("--hosts", "-hosts", "--hostfile", "-hostfile"):
            i += 1
        elif a == "--env":
            k, _, v = args[i + 1].partition("="); extra[k] = v; i += 1
        elif a == "-genv":
            extra[args[i + 1]] = args[i + 2]; i += 2
    i += 1
ppn = ppn or world
procs = []
for r in range(world):
    env = {k: v for k, v in os.environ.items() if k not in extra}
    env.update(extra)
    for k in drop:
        env.pop(k, None)
    if name == "srun":
        env.update(SLURM_PROCID=str(r), SLURM_NTASKS=str(world), SLURM_LOCALID=str(r % ppn), SLURM_NODEID=str(r // ppn),
                   SLURM_STEP_NODELIST="localhost")
    else:
        env.update(PMI_RANK=str(r), PMI_SIZE=str(world), PALS_RANKID=str(r), PALS_LOCAL_RANKID=str(r % ppn),
                   PALS_NODEID=str(r // ppn), PALS_LOCAL_SIZE=str(ppn))
    procs.append(subprocess.Popen(cmd, env=env, start_new_session=True))  # own groups, like mpirun's ranks
code = 0
pending = list(procs)
while pending:
    for p in list(pending):
        rc = p.poll()
        if rc is None:
            continue
        pending.remove(p)
        if rc != 0 and code == 0:
            code = rc if rc > 0 else 128 - rc
            for q in pending:  # --kill-on-bad-exit
                q.send_signal(signal.SIGTERM)
    time.sleep(0.02)
sys.exit(code)
'''


def install_fake(bin_dir: Path, name: str) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(FAKE.replace("__PYTHON__", sys.executable).replace("__NAME__", name))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


class LauncherContract:
    launcher_name: str = ""
    fake: Optional[str] = None  # binary to fake on PATH when the real one is absent (or always, if force_fake)
    force_fake: bool = False
    maps_signals: bool = True  # a rank's SIGSEGV reaches the driver as a crash
    keeps_exit_codes: bool = True  # a rank's exit code (125: unresolved) reaches the driver
    orders_failures: bool = True  # the rank that died first is the root cause
    identity_env: dict = {}  # launcher variables for rank 3 of a 2x2 world

    # -- fixtures

    def make_launcher(self, **kwargs: Any):
        cls = type(get_launcher(self.launcher_name))
        if self.launcher_name == "local":
            return cls()
        return cls(python=kwargs.pop("python", "/opt/py/bin/python"), as_root=kwargs.pop("as_root", False), **kwargs)

    def live_launcher(self, **kwargs: Any):
        cls = type(get_launcher(self.launcher_name))
        return cls() if self.launcher_name == "local" else cls(python=sys.executable, **kwargs)

    @pytest.fixture
    def live_env(self, tmp_path: Path) -> dict:
        env = {**os.environ, "ENVMATRIX_TEST_MARKER": uuid.uuid4().hex, "PYTHONUNBUFFERED": "1"}
        if self.fake and (self.force_fake or shutil.which(self.fake) is None):
            install_fake(tmp_path / "fakebin", self.fake)
            env["PATH"] = f"{tmp_path / 'fakebin'}{os.pathsep}{env['PATH']}"
        elif self.fake is None and self.launcher_name not in ("local", "torchrun") and shutil.which(self.launcher_name) is None:
            pytest.skip(f"{self.launcher_name} is not installed")
        return env

    def run_command(self, tmp_path: Path, env: dict, grid: Grid, code: str, setup: Setup, timeout_s: float = 30, **kw):
        probe = get_probe("command")
        spec = probe.spec({"command": [sys.executable, "-c", code], "timeout_s": timeout_s, "grace_s": 2.0})
        run = plan_runs([setup], [grid], spec, "gloo", self.launcher_name)[0]
        return execute(run, self.live_launcher(**kw), probe, str(tmp_path / "work"), env, {}, 0)

    # -- the hooks the engine asks (launchers.base.Launcher declares each, with its default)

    def test_engine_hooks_have_their_declared_types(self) -> None:
        from envmatrix.boundary import ProcessOutcome
        from envmatrix.launchers import Launcher

        launcher = self.make_launcher()
        assert isinstance(launcher, Launcher) and launcher.name == self.launcher_name
        for flag in ("forwards_stack_signal", "reports_env", "uses_warm_pool"):
            assert isinstance(getattr(launcher, flag), bool), flag
        ended = ProcessOutcome("rank0", 1, 0, None, None, 0.0)
        assert launcher.map_outcome(ended) == ended  # a clean exit means the same to every launcher
        assert launcher.rank_exits("") == [] and launcher.launcher_failure("") is None  # no output: nothing named
        assert launcher.node_hosts({}) == ()  # no hosts given, no allocation: every rank on this host
        assert launcher.check_allocation([Grid(1, 2)], "gloo", {}) is None

    # -- plan -> argv/env (pure)

    @pytest.mark.parametrize("grid", ["1x2", "2x2"])
    def test_plan_matches_golden(self, grid: str) -> None:
        run = plan_runs([weird_setup()], [Grid(*map(int, grid.split("x")))],
                        get_probe("builtin").spec({"timeout_s": 60, "collectives": ["allreduce"]}), "gloo", self.launcher_name)[0]
        run = fixed_key(run)
        first = self.make_launcher().build(run, golden_ctx())
        again = self.make_launcher().build(run, golden_ctx())
        assert plan_record(first) == plan_record(again)  # pure: same input, same plan
        check_golden(f"{self.launcher_name}_{grid}", plan_record(first))

    def test_weird_values_reach_argv_or_env_literally(self) -> None:
        run = plan_runs([weird_setup()], [Grid(1, 2)], get_probe("builtin").spec({}), "gloo", self.launcher_name)[0]
        plan = self.make_launcher().build(run, golden_ctx())
        for proc in plan.processes:
            carried = any(WEIRD in a for a in proc.argv) or proc.env.get("ENVMATRIX_WEIRD") == WEIRD
            assert carried and isinstance(proc.argv, tuple)
        assert all(env["ENVMATRIX_WEIRD"] == WEIRD and "NCCL_DEBUG" not in env for env in plan.intended_env)

    def test_rank_identity(self) -> None:
        if not self.identity_env:
            pytest.skip("the local launcher sets RANK itself")
        env = {**self.identity_env, "ENVMATRIX_LAUNCHER": self.launcher_name, "ENVMATRIX_PPN": "2",
               "ENVMATRIX_EMULATE": "1", "ENVMATRIX_UNSET": "NCCL_DEBUG", "NCCL_DEBUG": "INFO"}
        out, rank = derive_rank_env(env)
        assert rank == 3
        assert (out["RANK"], out["WORLD_SIZE"], out["LOCAL_RANK"], out["GROUP_RANK"]) == ("3", "4", "1", "1")
        assert out["NCCL_HOSTID"] == "envmatrix-node1" and "NCCL_DEBUG" not in out

    # -- real processes

    def test_env_delivered_to_every_rank(self, tmp_path: Path, live_env: dict) -> None:
        setup = Setup("ok", (Atom("NCCL_ALGO", value="Tree"), Atom("ENVMATRIX_WEIRD", value=WEIRD)))
        result = self.run_command(tmp_path, live_env, Grid(2, 2), "import os; assert os.environ['NCCL_ALGO'] == 'Tree'", setup)
        assert result.outcome == "pass", (result.root_cause, [r.log_tail for r in result.ranks])
        if self.launcher_name != "local":  # local + command probe: env given by execve, no report to compare
            assert [r.env["RANK"] for r in result.ranks] == ["0", "1", "2", "3"]
            assert all(r.env["ENVMATRIX_WEIRD"] == WEIRD for r in result.ranks)
        assert_no_processes(live_env["ENVMATRIX_TEST_MARKER"])

    def test_argv_and_env_reach_the_rank_without_a_shell(self, tmp_path: Path, live_env: dict) -> None:
        # a shell anywhere between driver and rank would expand $HOME, split at ';' or drop quotes: this code would not run
        code = f"import os; w = {WEIRD!r}; assert os.environ['ENVMATRIX_WEIRD'] == w"
        setup = Setup("weird", (Atom("ENVMATRIX_WEIRD", value=WEIRD),))
        result = self.run_command(tmp_path, live_env, Grid(1, 2), code, setup)
        assert result.outcome == "pass", (result.root_cause, [r.log_tail for r in result.ranks])
        assert_no_processes(live_env["ENVMATRIX_TEST_MARKER"])

    @pytest.mark.slow  # waits out a 3 s timeout
    def test_timeout_kills_every_rank(self, tmp_path: Path, live_env: dict) -> None:
        code = "import subprocess, time; subprocess.Popen(['sleep', '300']); time.sleep(300)"
        result = self.run_command(tmp_path, live_env, Grid(1, 2), code, Setup("hang"), timeout_s=3)
        assert result.outcome == "timeout" and result.duration_s < 3 + 6
        assert_no_processes(live_env["ENVMATRIX_TEST_MARKER"], wait_s=8)

    @pytest.mark.slow  # three real runs
    def test_exit_code_mapping(self, tmp_path: Path, live_env: dict) -> None:
        skip = self.run_command(tmp_path / "a", live_env, Grid(1, 2), "import sys; sys.exit(125)", Setup("skip"))
        assert skip.outcome == ("unresolved" if self.keeps_exit_codes else "exit_error"), skip.root_cause
        fail = self.run_command(tmp_path / "b", live_env, Grid(1, 2),
                                "import os, sys; sys.exit(3 if os.environ['RANK'] == '1' else 0)", Setup("fail"))
        assert fail.outcome == "exit_error", fail.root_cause
        if self.maps_signals:
            crash = self.run_command(tmp_path / "c", live_env, Grid(1, 2),
                                     "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", Setup("segv"))
            # Both ranks segfault, but the first death may stop the other before it gets there (torchrun's agent
            # tears the group down): the root cause is whichever died first, the other crashed too or was stopped.
            first = next(r for r in crash.ranks if r.rank == crash.root_cause["rank"])
            assert crash.outcome == "crash" and first.signal == "SIGSEGV", crash.root_cause
            for other in (r for r in crash.ranks if r is not first):
                assert other.signal == "SIGSEGV" or other.killed_by == "peer_failure", (other, crash.root_cause)
            if self.orders_failures:
                # rank 1 dies first, rank 0 two seconds later unless the launcher stops it: the first observed
                # failure is the root cause, and a rank the launcher stopped says so (the shim once exited 1 there)
                later = self.run_command(tmp_path / "d", live_env, Grid(1, 2),
                                         "import os, signal, time; os.environ['RANK'] == '0' and time.sleep(2); "
                                         "os.kill(os.getpid(), signal.SIGSEGV)", Setup("segv_later"))
                assert later.root_cause["rank"] == 1 and later.root_cause["outcome"] == "crash", later.root_cause
                rank0 = next(r for r in later.ranks if r.rank == 0)
                assert rank0.signal == "SIGSEGV" or rank0.killed_by == "peer_failure", rank0
        assert_no_processes(live_env["ENVMATRIX_TEST_MARKER"])


# launcher name -> what differs from the contract's defaults; a new launcher adds its line here
TRAITS: dict[str, dict[str, Any]] = {
    "local": {},
    "torchrun": {
        "slow_start": True,  # its elastic agent takes seconds to start: each live run is over the fast lane's 4 s
        # torchrun exits 1 whatever its workers returned; each worker's exit code and signal come from its
        # ChildFailedError report (launchers.rank_exits), so they are kept all the same
        "identity_env": {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1"},
    },
    "mpirun": {  # the real OpenMPI mpirun; its live tests skip where it is not installed
        "identity_env": {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "3",
                         "OMPI_COMM_WORLD_LOCAL_SIZE": "4"},
    },
    "mpiexec": {
        "fake": "mpiexec",
        "force_fake": True,  # the PALS flags are not OpenMPI's; always the fake here
        "orders_failures": False,  # the fake says nothing of which rank failed first (one exit status for all)
        "identity_env": {"PALS_RANKID": "3", "PMI_SIZE": "4", "PALS_LOCAL_RANKID": "3", "PALS_NODEID": "0"},
    },
    "srun": {
        "fake": "srun",
        "force_fake": True,  # the real srun runs in tests/test_launchers_srun.py::test_cli_sweep_with_real_slurm
        "orders_failures": False,  # the fake says nothing of which rank failed first (one exit status for all)
        "identity_env": {"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "3", "SLURM_NODEID": "0"},
    },
}


LIVE_TESTS = ("test_env_delivered_to_every_rank", "test_argv_and_env_reach_the_rank_without_a_shell",
              "test_timeout_kills_every_rank", "test_exit_code_mapping")


def _marked_slow(test: Any) -> Any:
    """``test`` marked slow for one launcher's class only: the base class's function is shared by every launcher."""
    @functools.wraps(test)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        return test(self, *args, **kwargs)

    return pytest.mark.slow(run)


def contract_class(name: str) -> type:
    """The contract test class for launcher ``name`` (KeyError: add the launcher to TRAITS)."""
    traits = dict(TRAITS[name])
    body: dict[str, Any] = {"launcher_name": name, **traits}
    if traits.pop("slow_start", False):
        body.update({test: _marked_slow(getattr(LauncherContract, test)) for test in LIVE_TESTS})
    return type(f"Test{name.title()}Contract", (LauncherContract,), body)
