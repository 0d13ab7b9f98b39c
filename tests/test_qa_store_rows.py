"""A results store with one row that does not decode (a QA pass's finding): report, diff, a sweep's resume,
bisect --failing and sweep --baseline died with a 40-line traceback, exit 1 (JSONDecodeError; TypeError from
ProbeResult.__init__ for a JSON list or an empty object). Each now refuses in one line that names the store file and
the row, exit 2, and writes nothing: the store's files stay byte for byte as they were, and no report appears.
So does a row that decodes but holds a field of the wrong kind (a setup that is a string: 'str' object has no
attribute 'get' in report and diff, a report.html not written after a resumed sweep)."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import Cli

# every case runs the real CLI (about 2 s each on 2 cores); one real sweep for the module, copied per case
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("qa_store_rows")]

CONF = """
name: g
backend: gloo
allow_ignored_vars: true
grids: [1x2]
setups:
  a: {GLOO_SOCKET_IFNAME: lo}
probe: {timeout_s: 30}
"""

# what is corrupted: the table the refusal must name, and the update that breaks its only row
CORRUPTIONS = {
    "truncated-json": ("results", "UPDATE results SET result_json = '{truncated'"),
    "json-list": ("results", "UPDATE results SET result_json = '[1,2]'"),
    "empty-object": ("results", "UPDATE results SET result_json = '{}'"),
    "sweep-config-garbage": ("sweeps", "UPDATE sweeps SET config_json = 'garbage'"),
    # decodes, but a field of the wrong kind failed far from the store ('str' object has no attribute 'get')
    "setup-a-string": ("results", "UPDATE results SET result_json = json_set(result_json, '$.setup', 'x')"),
    "rank-env-a-list": ("results", "UPDATE results SET result_json = json_set(result_json, '$.ranks[0].env', json('[]'))"),
}

# each command that reads the corrupt store (bad): conf, a sound copy (good) and a fresh --out (fresh) as it needs
COMMANDS = {
    "report": lambda conf, good, bad, fresh: ["report", bad],
    "diff": lambda conf, good, bad, fresh: ["diff", good, bad],
    "sweep-resume": lambda conf, good, bad, fresh: ["sweep", f"conf={conf}", "--out", bad],
    "bisect-failing": lambda conf, good, bad, fresh: ["bisect", f"conf={conf}", "--failing", "1x2", "--out", bad],
    "sweep-baseline": lambda conf, good, bad, fresh: ["sweep", "conf=default", "backend=gloo", "--out", fresh,
                                                      "--baseline", bad],
}


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> Path:
    """A directory holding g.yaml and run/, the run directory of one real (passing) sweep of it."""
    root = tmp_path_factory.mktemp("store_rows")
    (root / "g.yaml").write_text(CONF)
    done = Cli(root).run("sweep", f"conf={root / 'g.yaml'}", "--out", str(root / "run"))
    assert done.returncode == 0, done.stdout + done.stderr
    return root


def _files(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_a_store_with_a_row_that_does_not_decode_is_refused_in_one_line(cli, tmp_path, swept, corruption, command):
    good, bad, fresh = tmp_path / "good", tmp_path / "bad", tmp_path / "fresh"
    shutil.copytree(swept / "run", good)
    shutil.copytree(swept / "run", bad)
    table, update = CORRUPTIONS[corruption]
    with contextlib.closing(sqlite3.connect(bad / "results.sqlite")) as db:
        (run_key,) = db.execute("SELECT run_key FROM results").fetchone()
        (sweep_id,) = db.execute("SELECT id FROM sweeps").fetchone()
        with db:
            db.execute(update)
    assert not (bad / "results.sqlite-wal").exists()  # the update is in the file itself, as a copy would carry it
    before = _files(bad)

    done = cli.run(*map(str, COMMANDS[command](swept / "g.yaml", good, bad, fresh)))

    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert f"{bad / 'results.sqlite'}: corrupt store" in line, line
    assert f"table {table}" in line and (run_key if table == "results" else sweep_id) in line, line
    assert "left untouched" in line, line
    assert _files(bad) == before, "the corrupt store's directory changed"  # results.sqlite byte for byte, no report
    assert not fresh.exists(), "a refused sweep --baseline made its --out"
