"""report.html from real runs with hostile setup names, env values and root-cause lines (a QA pass's findings)."""

from __future__ import annotations

import pytest
import yaml

from conftest import write_conf


@pytest.mark.slow
def test_a_setup_name_with_dollars_is_drawn_as_written(cli, tmp_path):
    # Before: matplotlib read '$^^$' in the curve legend as mathtext and raised, so the bench wrote no report.html
    # ('html report not written: ValueError ... ParseSyntaxException'); 'a$b$c' came out as a, italic b, c.
    name = "x$^^$y"
    conf = write_conf(tmp_path / "c.yaml", yaml.safe_dump({"name": "d", "backend": "gloo", "setups": {name: {"QA_V": "1"}}}))
    done = cli.run("bench", f"conf={conf}", "--setup", name, "--grid", "1x1", "-b", "1K", "-e", "2K", "-n", "1", "-w", "0",
                   "-c", "allreduce", "--out", str(tmp_path / "b"), "--allow-unknown-vars")
    assert done.returncode == 0 and "html report:" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    page = (tmp_path / "b" / "report.html").read_text()
    assert 'data-plot="curve-allreduce"' in page and f"({name}) 1x1</text>" in page
