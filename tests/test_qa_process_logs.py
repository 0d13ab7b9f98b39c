"""QA of what a run keeps of its ranks' output, with real ranks that print megabytes, binary garbage, or nothing.

Each rank's record keeps a bounded, readable account (torch elastic's error file idea): its log tail, its error and
its root-cause line stay small whatever the rank printed, the telling line is still found inside garbage, and the
whole result stays a small JSON document.
"""

from __future__ import annotations

import json
import os
import sys
import uuid

from conftest import assert_no_processes
from envmatrix.engine.launch import execute
from envmatrix.env import Setup
from envmatrix.launchers import get_launcher
from envmatrix.planning import Grid, plan_runs
from envmatrix.probes import get_probe
from envmatrix.probes.rootcause import root_cause_line
from envmatrix.results import LINE_CHARS


def _run(tmp_path, code: str):
    marker = uuid.uuid4().hex
    env = {**os.environ, "ENVMATRIX_TEST_MARKER": marker, "PYTHONUNBUFFERED": "1"}
    probe = get_probe("command")
    spec = probe.spec({"command": [sys.executable, "-c", code], "timeout_s": 60, "grace_s": 2.0})
    run = plan_runs([Setup("logs")], [Grid(1, 2)], spec, "gloo", "local")[0]
    result = execute(run, get_launcher("local"), probe, str(tmp_path / "w"), env, {}, 0)
    assert_no_processes(marker, wait_s=2)
    return result


def _bounded(result) -> None:
    for rank in result.ranks:
        assert len(rank.log_tail) <= 4000, rank.rank
        assert len(rank.root_cause_line or "") <= LINE_CHARS + 40 and len(rank.error or "") <= LINE_CHARS + 40, rank.rank
    assert len(json.dumps(result.to_json())) < 64_000


def test_a_rank_printing_megabytes_on_one_line_keeps_a_bounded_record(tmp_path):
    # before: the 3 MB line was each rank's root-cause line whole (36 MB results.json for a 5-setup sweep)
    result = _run(tmp_path, "import sys; sys.stdout.write('x' * 5_000_000 + '\\n' + 'y' * 3_000_000 + '\\n'); sys.exit(2)")
    assert result.outcome == "exit_error"
    line = result.root_cause["line"]
    assert line.startswith("y" * 100) and line.endswith(f"[{3_000_000 - LINE_CHARS} more characters]"), line[-80:]
    _bounded(result)


def test_binary_garbage_still_gives_the_telling_line_and_json_safe_text(tmp_path):
    code = ("import os, sys; out = sys.stdout.buffer; out.write(os.urandom(300_000)); "
            "out.write(b'\\nRuntimeError: gloo said no \\xff\\xfe\\n'); out.write(os.urandom(1000).replace(b'\\n', b' ')); "
            "out.flush(); sys.exit(4)")
    result = _run(tmp_path, code)
    assert result.outcome == "exit_error" and result.root_cause["line"].startswith("RuntimeError: gloo said no"), result.root_cause
    _bounded(result)
    json.loads(json.dumps(result.to_json()))  # replacement characters, never bytes that do not encode


def test_a_rank_that_closes_its_output_and_fails_keeps_its_exit_code_as_the_cause(tmp_path):
    result = _run(tmp_path, "import os, sys, time; os.close(1); os.close(2); os.environ['RANK'] == '0' and time.sleep(0.5); "
                            "sys.exit(5 if os.environ['RANK'] == '1' else 0)")
    assert result.outcome == "exit_error" and result.root_cause["rank"] == 1 and result.root_cause["line"] == "exit code 5"
    assert [r.log_tail for r in result.ranks] == ["", ""]


def test_root_cause_line_is_clipped_and_says_so():
    assert root_cause_line("ok\n" + "NCCL WARN " + "z" * 5000) == "z" * LINE_CHARS + f" ... [{5000 - LINE_CHARS} more characters]"
    assert root_cause_line("RuntimeError: short") == "RuntimeError: short"
