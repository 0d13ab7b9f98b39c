"""Environment atoms, setups and the one function that turns them into a process env."""

from envmatrix.env.atoms import Atom, Setup, atoms_from_mapping, setup_diff
from envmatrix.env.merge import SAFETY_PINS, caller_pins, compose_rank_env, materialize

__all__ = [
    "Atom",
    "Setup",
    "atoms_from_mapping",
    "setup_diff",
    "SAFETY_PINS",
    "caller_pins",
    "compose_rank_env",
    "materialize",
]
