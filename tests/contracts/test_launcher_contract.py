"""The launcher contract (tests/launcher_contract.py) for every registered launcher: golden argv, rank identity,
env delivery, no shell on the way, timeout kill with no child left, exit-code mapping."""

from __future__ import annotations

from envmatrix.launchers import launcher_names
from launcher_contract import TRAITS, contract_class


def test_every_registered_launcher_runs_the_contract():
    assert set(launcher_names()) <= set(TRAITS), f"add to launcher_contract.TRAITS: {set(launcher_names()) - set(TRAITS)}"


def test_a_launcher_that_only_builds_gets_every_hooks_default():
    from envmatrix.boundary import ProcessOutcome
    from envmatrix.launchers import Launcher

    class BuildOnly(Launcher):
        def build(self, run, ctx):
            raise NotImplementedError

    launcher, crashed = BuildOnly(), ProcessOutcome("rank0", 1, 139, None, None, 0.0)
    assert (launcher.forwards_stack_signal, launcher.reports_env, launcher.uses_warm_pool) == (True, False, False)
    assert launcher.map_outcome(crashed) is crashed  # exit codes are the ranks' own unless a launcher says otherwise
    assert launcher.rank_exits("srun: error: n2: task 1: Exited with exit code 3") == []
    assert launcher.launcher_failure("ORTE was unable to reliably start one or more daemons") is None
    assert launcher.node_hosts({"SLURM_JOB_NODELIST": "n[1-2]"}) == ()
    assert launcher.missing_here() is None


def test_shim_launchers_map_a_signal_reported_as_128_plus_n_back():
    from envmatrix.boundary import ProcessOutcome
    from envmatrix.launchers import get_launcher

    mapped = get_launcher("mpirun").map_outcome(ProcessOutcome("mpirun", 1, 139, None, None, 0.0))
    assert (mapped.exit_code, mapped.signal) == (None, "SIGSEGV")
    assert get_launcher("local").map_outcome(ProcessOutcome("rank0", 1, 139, None, None, 0.0)).exit_code == 139


def test_the_engine_and_app_ask_launchers_only_through_declared_hooks():
    """Every ``launcher.<attr>`` engine/ and app/ read is declared on the ABC, and none is reached by getattr."""
    import ast
    from pathlib import Path

    import envmatrix
    from envmatrix.launchers import Launcher

    root = Path(envmatrix.__file__).parent
    for path in sorted([*(root / "engine").glob("*.py"), *(root / "app").glob("*.py")]):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr" and node.args:
                target = ast.unparse(node.args[0])
                assert "launcher" not in target, f"{path.name}:{node.lineno}: getattr({target}, ...): declare a hook"
            if isinstance(node, ast.Attribute) and ast.unparse(node.value) in ("launcher", "session.launcher"):
                assert hasattr(Launcher, node.attr), f"{path.name}:{node.lineno}: launcher.{node.attr} is not a Launcher hook"


for _name in launcher_names():
    if _name in TRAITS:
        globals()[f"Test{_name.title()}Contract"] = contract_class(_name)
