"""A rendezvous port taken between free_port() and rank 0's bind is the launch's fault: the run starts again.

Real gloo ranks; the only stand-in is which port free_port() hands out first (one a live socket holds, as a
parallel run or test worker would).
"""

from __future__ import annotations

import json
import socket

import pytest

import envmatrix.engine.launch as launch
from envmatrix.cli import main

CONF = """
name: clash
backend: gloo
grids: [1x2]
setups: {base: {}}
probe: {timeout_s: 60}
"""


def _sweep_with_first_port_taken(tmp_path, monkeypatch, tries: int) -> tuple[int, list[dict], int]:
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("0.0.0.0", 0))
    held.listen()
    taken = held.getsockname()[1]
    handed = iter([taken])
    real = launch.free_port
    monkeypatch.setattr(launch, "free_port", lambda: next(handed, None) or real())
    monkeypatch.setattr(launch, "RENDEZVOUS_TRIES", tries)
    conf = tmp_path / "clash.yaml"
    conf.write_text(CONF)
    out = tmp_path / "run"
    try:
        rc = main(["sweep", f"conf={conf}", "--out", str(out), "--no-pool"])
    finally:
        held.close()
    return rc, json.loads((out / "results.json").read_text())["results"], taken


@pytest.mark.slow
def test_a_run_whose_rendezvous_port_was_taken_starts_again_on_a_new_port(tmp_path, monkeypatch):
    rc, results, taken = _sweep_with_first_port_taken(tmp_path, monkeypatch, tries=3)
    assert rc == 0 and [r["outcome"] for r in results] == ["pass"]
    assert list((tmp_path / "run").rglob(f"port_{taken}_taken")), "the first attempt's files are kept aside"


@pytest.mark.slow
def test_without_the_retry_the_same_clash_reads_as_a_failed_setup(tmp_path, monkeypatch):
    rc, results, taken = _sweep_with_first_port_taken(tmp_path, monkeypatch, tries=1)
    assert rc == 1 and results[0]["outcome"] != "pass"
    assert "EADDRINUSE" in (results[0]["root_cause"] or {}).get("line", "") or "address already in use" in json.dumps(results[0])
