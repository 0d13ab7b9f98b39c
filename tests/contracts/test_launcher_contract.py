"""The launcher contract (tests/launcher_contract.py) for every registered launcher: golden argv, rank identity,
env delivery, no shell on the way, timeout kill with no child left, exit-code mapping."""

from __future__ import annotations

from envmatrix.launchers import launcher_names
from launcher_contract import TRAITS, contract_class


def test_every_registered_launcher_runs_the_contract():
    assert set(launcher_names()) <= set(TRAITS), f"add to launcher_contract.TRAITS: {set(launcher_names()) - set(TRAITS)}"


for _name in launcher_names():
    if _name in TRAITS:
        globals()[f"Test{_name.title()}Contract"] = contract_class(_name)
