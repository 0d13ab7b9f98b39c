"""A damaged results.sqlite (a copy cut short, pages overwritten) given to a real sweep: one line naming the file,
exit 2, nothing launched and nothing written beside it (a QA pass's findings)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from conftest import write_conf
from envmatrix.results import ProbeResult, RankResult
from envmatrix.store import open_store

PAGE = 4096


def _store_with_results(path: Path, n: int = 12) -> None:
    with open_store(str(path)) as store:
        store.open_sweep("s1", {})
        for i in range(n):
            store.put(ProbeResult(run_key=f"k{i}", setup={"name": f"s{i}", "atoms": []}, grid="1x1",
                                  probe={"name": "command", "params": {}}, backend="gloo", launcher="local",
                                  outcome="pass", ranks=[RankResult(rank=0, outcome="pass", log_tail="x" * 3000)],
                                  sweep_id="s1"))
    assert not Path(f"{path}-wal").exists()  # the last close checkpointed: the file is the whole store


def _sweep(cli, tmp_path: Path, out: Path):
    conf = write_conf(tmp_path / "c.yaml", f"""
backend: gloo
grids: [1x1]
setups: {{a: {{QA_V: a}}}}
probe: {{name: command, timeout_s: 30, command: [{sys.executable}, -c, "pass"]}}
""")
    return cli.run("sweep", f"conf={conf}", "--out", str(out), "--allow-unknown-vars")


def _damaged(out: Path, how: str) -> bytes:
    out.mkdir()
    path = out / "results.sqlite"
    _store_with_results(path)
    data = bytearray(path.read_bytes())
    if how == "cut short":
        data = data[: len(data) // 2]
    else:  # pages after the schema's overwritten, the header left as it was
        data[2 * PAGE : 4 * PAGE] = random.Random(7).randbytes(2 * PAGE)
    path.write_bytes(bytes(data))
    return bytes(data)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["cut short", "pages overwritten"])
def test_a_damaged_store_is_refused_before_anything_is_launched_or_written(cli, tmp_path, how):
    # Pages overwritten: the header and schema read fine, so the sweep opened the store, started its warm pool and
    # died in open_sweep with a traceback, exit 1 ('failures found'). Cut short: refused, but only after the lock file
    # was written beside it.
    out = tmp_path / "o"
    before = _damaged(out, how)
    done = _sweep(cli, tmp_path, out)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert lines[0].startswith(f"envmatrix: error: {out}/results.sqlite: corrupt store (") and "left untouched" in lines[0]
    assert (out / "results.sqlite").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["results.sqlite"]  # no lock, WAL, logs or reports


def test_an_opened_store_with_damaged_pages_is_a_corrupt_store_error(tmp_path):
    # the WAL beside a store hides its pages from the read-only check: the store's own open checks them
    from envmatrix.errors import ConfigError

    out = tmp_path / "o"
    _damaged(out, "pages overwritten")
    (out / "results.sqlite-wal").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"results.sqlite: corrupt store \(.+\); left untouched"):
        open_store(str(out / "results.sqlite"))
