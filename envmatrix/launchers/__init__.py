"""Launchers turn a run into process specs (pure); execution.processes runs them."""

from envmatrix.launchers.base import LaunchContext, Launcher, LaunchPlan, RankSlot, get_launcher, launcher_names, register
from envmatrix.launchers import local as _local  # noqa: F401  (registers "local")

__all__ = ["LaunchContext", "Launcher", "LaunchPlan", "RankSlot", "get_launcher", "launcher_names", "register"]
