"""The store contract, run against every registered store scheme with real writer/reader processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from envmatrix.errors import ConfigError
from envmatrix.results import ProbeResult, RankResult
from envmatrix.store import open_store
from envmatrix.store.base import _SCHEMES

# scheme -> store URL inside a test's tmp_path; a new scheme adds its line here (or the coverage test fails)
URL_OF_SCHEME = {"sqlite": lambda tmp: f"sqlite:///{tmp / 'results.sqlite'}"}

SCHEMES = _SCHEMES.names()

# A writer in its own process: puts results r0, r1, ... with 3 ranks and 4 metric rows each, and prints each
# index once put() has returned (committed).
WRITER = r"""
import sys
from envmatrix.results import ProbeResult, RankResult
from envmatrix.store import open_store
import glob, os, time
for _ in range(6000):  # start gate: wait until every reader is reading (argv[3]: gate folder, argv[4]: readers)
    if len(sys.argv) < 5 or len(glob.glob(os.path.join(sys.argv[3], "ready.*"))) >= int(sys.argv[4]):
        break
    time.sleep(0.01)
with open_store(sys.argv[1]) as store:
    store.open_sweep("s1", {})
    for i in range(int(sys.argv[2])):
        store.put(ProbeResult(run_key=f"r{i}", setup={"name": f"r{i}", "atoms": []}, grid="1x3",
                              probe={"name": "builtin", "params": {}}, backend="gloo", launcher="local", outcome="pass",
                              ranks=[RankResult(rank=k, outcome="pass", env={"NCCL_ALGO": "Ring"}) for k in range(3)],
                              metrics=[{"collective": "allreduce", "size_bytes": 2 ** k, "time_us": 1.0} for k in range(4)],
                              started_at=1.0, finished_at=2.0, sweep_id="s1"))
        print(i, flush=True)
"""

READER = r"""
import os, sys, time
from envmatrix.store import open_store
open(os.path.join(sys.argv[3], f"ready.{os.getpid()}"), "w").close()
seen, counts = 0, set()
deadline = time.time() + 120
while seen < int(sys.argv[2]) and time.time() < deadline:
    with open_store(sys.argv[1]) as store:
        results = store.latest()
        assert all(len(r.ranks) == 3 and len(r.metrics) == 4 for r in results), "a torn result"
        assert len(results) >= seen, "a committed result vanished"
        seen = len(results)
        counts.add(seen)
print(seen, len([c for c in counts if 0 < c < int(sys.argv[2])]))
"""


def _result(key: str, outcome: str = "pass") -> ProbeResult:
    return ProbeResult(run_key=key, setup={"name": key, "atoms": []}, grid="1x2", probe={"name": "builtin", "params": {}},
                       backend="gloo", launcher="local", outcome=outcome,
                       ranks=[RankResult(rank=0, outcome=outcome, env={"NCCL_ALGO": "Ring"})],
                       started_at=1.0, finished_at=2.5, sweep_id="s1")


def _python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


@pytest.fixture(params=SCHEMES)
def url(request, tmp_path: Path) -> str:
    return URL_OF_SCHEME[request.param](tmp_path)


def test_every_registered_scheme_has_a_contract_url():
    assert set(SCHEMES) <= set(URL_OF_SCHEME), f"add the new scheme's URL to URL_OF_SCHEME: {set(SCHEMES) - set(URL_OF_SCHEME)}"


def test_resume_sees_every_committed_result_and_counts_attempts(url: str):
    with open_store(url) as store:
        store.open_sweep("s1", {"x": 1})
        assert store.put(_result("a")) == 1 and store.put(_result("b", "init_error")) == 1
    with open_store(url) as store:  # a later command resumes from what the first committed
        store.open_sweep("s1", {"x": 1})
        assert store.completed_keys(["a", "b", "c"]) == {"a", "b"}
        assert store.put(_result("a", "timeout")) == 2
        latest = {r.run_key: r for r in store.latest(sweep_id="s1")}
        assert latest["a"].outcome == "timeout" and latest["b"].outcome == "init_error"
        assert latest["a"].ranks[0].env == {"NCCL_ALGO": "Ring"} and latest["a"].duration_s == 1.5
        assert store.count() == 3 and store.count("a") == 2 and [s["id"] for s in store.sweeps()] == ["s1"]


def test_commit_is_atomic_when_the_writer_is_killed(url: str):
    writer = subprocess.Popen(_python(WRITER, url, "100000"), stdout=subprocess.PIPE, text=True)
    try:
        committed = [int(writer.stdout.readline()) for _ in range(20)]
        os.kill(writer.pid, signal.SIGKILL)  # somewhere inside a later put()
    finally:
        writer.kill()
        writer.wait()
    acknowledged = len(committed) + sum(1 for _ in writer.stdout)
    writer.stdout.close()
    with open_store(url) as store:
        results = store.latest()
        assert acknowledged <= len(results) <= acknowledged + 1  # at most the one in flight, and only whole
        assert all(len(r.ranks) == 3 and len(r.metrics) == 4 for r in results)
        assert store.count() == len(results)


def test_concurrent_readers_never_see_a_torn_result(url: str, tmp_path: Path):
    total, gate = 300, tmp_path / "gate"
    gate.mkdir()
    with open_store(url) as store:
        store.open_sweep("s1", {})  # the schema exists before readers open the file
    writer = subprocess.Popen(_python(WRITER, url, str(total), str(gate), "2"), stdout=subprocess.DEVNULL)
    readers = [subprocess.Popen(_python(READER, url, str(total), str(gate)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for _ in range(2)]
    outputs = [r.communicate(timeout=180) for r in readers]
    assert writer.wait(timeout=180) == 0
    for reader, (out, err) in zip(readers, outputs):
        assert reader.returncode == 0, err
    finals, partial_states = zip(*(map(int, out.split()) for out, _ in outputs))
    assert finals == (total, total)  # each reader read until it saw every committed result
    assert sum(partial_states) > 0  # and read while the writer was still writing


@pytest.mark.parametrize("scheme", [s for s in SCHEMES if s == "sqlite"])
def test_corrupt_file_is_a_one_line_error_and_left_untouched(scheme: str, tmp_path: Path):
    path = tmp_path / "results.sqlite"
    path.write_bytes(b"this is not a database\n" * 10)
    before = path.read_bytes()
    with pytest.raises(ConfigError) as err:
        open_store(URL_OF_SCHEME[scheme](tmp_path))
    assert "corrupt store" in str(err.value) and "\n" not in str(err.value) and str(path) in str(err.value)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["results.sqlite"]
