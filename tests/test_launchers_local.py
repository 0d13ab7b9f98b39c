"""The local launcher passes the same contract (delivery checked from the probe's echoed env)."""

from launcher_contract import LauncherContract


class TestLocalContract(LauncherContract):
    launcher_name = "local"
