"""``envmatrix cluster`` under a user's Ctrl-C, with real namespaces (held-out QA of the network features)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from cluster_fixture import unavailable_reason
from envmatrix.network import links, state

REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")


def _interrupt_cluster_up(workdir, env, root):
    """``cluster up 200`` given SIGINT once its first host exists: (exit code, stderr, the cluster's tag)."""
    workdir.mkdir(parents=True)
    proc = subprocess.Popen([sys.executable, "-m", "envmatrix", "cluster", "up", "200", "--name", "qaint"],
                            env=env, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        tag = None
        while time.monotonic() < deadline and proc.poll() is None:
            records = list((root / "clusters").glob("*.json")) if (root / "clusters").is_dir() else []
            if records:
                tag = json.loads(records[0].read_text())["tag"]
                if any(ns.startswith(f"emx{tag}h") for ns in os.listdir("/run/netns")):  # cheap: the build is fast
                    break
            time.sleep(0.003)
        assert tag is not None and proc.poll() is None, "cluster up ended before a host was made"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, err, tag


@pytest.mark.slow
def test_ctrl_c_during_cluster_up_removes_the_hosts_and_does_not_offer_a_store_to_resume(tmp_path, cli, monkeypatch):
    root = tmp_path / "state"
    monkeypatch.setenv(state.STATE_ENV, str(root))
    env = {**cli.env, state.STATE_ENV: str(root)}
    try:
        for attempt in range(8):  # a Ctrl-C inside pyroute2's coroutines was lost (exit 0) or spewed: 3 in 15
            code, err, tag = _interrupt_cluster_up(tmp_path / str(attempt), env, root)
            assert code == 130, err
            # there is no store: the line said "finished runs are in the store, resume with: envmatrix cluster up"
            assert err.strip().splitlines()[-1] == "envmatrix: interrupted", err
            assert "Traceback" not in err and "Task was destroyed" not in err, err
            assert not [ns for ns in links.namespaces() if ns.startswith(f"emx{tag}h")]
            assert not links.link_exists(None, f"emx{tag}br")
            assert not list((root / "clusters").glob("*.json"))
    finally:
        subprocess.run([sys.executable, "-m", "envmatrix", "cluster", "down", "--all"], env=env, capture_output=True)


def test_a_ctrl_c_while_a_host_is_made_waits_for_its_netlink_calls(tmp_path, monkeypatch):
    # deterministic form of the race above: the signal arrives inside make_host_link (where pyroute2 runs its
    # coroutines); the KeyboardInterrupt must come after the host's link is whole, and the cluster is then removed
    monkeypatch.setenv(state.STATE_ENV, str(tmp_path / "state"))
    script = (
        "import os, signal, sys\n"
        "from envmatrix.cluster import emulated\n"
        "from envmatrix.network import links\n"
        "real = links.make_host_link\n"
        "def make_host_link(netns, root_ifname, *args, **kwargs):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    real(netns, root_ifname, *args, **kwargs)\n"
        "    print('made', root_ifname, links.link_exists(None, root_ifname), flush=True)\n"
        "links.make_host_link = make_host_link\n"
        "try:\n"
        "    emulated.up(3, 'qadefer')\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
        "print('left', [n for n in links.namespaces() if n.startswith('emx') and n[3:5] in\n"
        "      [r.tag for r in emulated.registry.all_records()]], [r.name for r in emulated.registry.all_records()])\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    lines = out.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith("made emx") and lines[0].endswith(" True"), out
    assert lines[1:] == ["interrupted", "left [] []"], out
