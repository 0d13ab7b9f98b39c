"""envmatrix report: one self-contained HTML page from a real run dir (sweep + bench + bisect + search), checked in Chromium."""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import REPO, Cli, pass_and_fail_conf
from report_helpers import load_page, screenshot
from search_helpers import fake_conf

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("report_html")]  # one worker: one full_run (the fixture is per worker)



@pytest.fixture(scope="module")
def full_run(tmp_path_factory) -> tuple[Path, dict]:
    """One run directory written by the real commands; each command's hook rewrites report.html."""
    tmp = tmp_path_factory.mktemp("report")
    cli = Cli(tmp)
    out = tmp / "run"
    outputs = {}
    conf = pass_and_fail_conf(tmp / "sweep.yaml", "report_demo")
    outputs["sweep"] = cli.run("sweep", f"conf={conf}", "--out", str(out), "--junit", str(tmp / "sweep.xml"))
    outputs["bench"] = cli.run("bench", "backend=gloo", "--grid", "1x2", "-b", "1K", "-e", "64K", "-f", "4", "-n", "3", "-w", "1",
                               "-c", "allreduce,allgather", "--out", str(out))
    env_file = tmp / "env0.sh"
    env_file.write_text("export NCCL_CROSS_NIC=1\nexport GLOO_SOCKET_IFNAME=envmx_missing0\nexport NCCL_NET_GDR_LEVEL=PHB\n")
    outputs["bisect"] = cli.run("bisect", "backend=gloo", "probe.collectives=[allreduce]", "probe.timeout_s=30", "--grid", "1x2",
                                "--env-file", str(env_file), "--out", str(out), "--no-repair")
    outputs["search"] = cli.run("search", f"conf={fake_conf(tmp / 'fake.yaml')}", "--trials", "6", "--out", str(out))
    return out, outputs


def test_every_command_writes_the_report(full_run):
    out, outputs = full_run
    for name, done in outputs.items():
        assert done.returncode in (0, 1), f"{name}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
        assert f"html report: {out / 'report.html'}" in done.stdout, f"{name}: {done.stdout[-2000:]}"
    assert (out / "bisect_env0_1x2.json").is_file()


def test_page_holds_every_section_and_is_self_contained(full_run):
    out, _ = full_run
    html = (out / "report.html").read_text()
    for plot in ("matrix", "curve-allreduce", "curve-allgather", "bisect-1", "search-history", "search-parallel", "search-importances"):
        assert f'data-plot="{plot}"' in html, plot
    # the matrix cell of the failing setup carries its root cause; the bisect names the real culprit
    assert "envmx_missing0" in html and "GLOO_SOCKET_IFNAME=envmx_missing0" in html
    assert re.search(r"culprits: <b><code>GLOO_SOCKET_IFNAME=envmx_missing0</code></b>", html)
    assert "Search fake" in html and "best so far: trial" in html
    # nothing is fetched at view time: no external scripts, styles, images or frames
    assert not re.search(r"<(script|img|iframe|link)[^>]+(src|href)=", html)
    assert not re.search(r"(src|href)=[\"'](https?:)?//", html)
    # the search's trials went to the same store, but they are not matrix columns
    with sqlite3.connect(out / "results.sqlite") as db:
        sweeps = {r[0].split("-")[0] for r in db.execute("SELECT DISTINCT sweep_id FROM results")}
    assert {"report_demo", "bench", "bisect", "search"} <= sweeps
    assert "(default)" not in html.split('data-plot="matrix"')[1].split("</table>")[0]


def test_page_renders_in_headless_chromium(full_run, tmp_path):
    out, _ = full_run
    loaded = load_page(out / "report.html")
    assert loaded.console == [], loaded.console
    assert loaded.figures >= 7 and loaded.drawn == loaded.figures, (loaded.figures, loaded.drawn)
    png = screenshot(out / "report.html", tmp_path / "report.png")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000  # a blank page compresses to a few kB


def test_chromium_check_sees_console_errors_and_blocked_fetches(tmp_path):
    """The harness itself can fail: an erroring script and an external image are reported."""
    page = tmp_path / "bad.html"
    html = (REPO / "envmatrix" / "reporting" / "templates" / "report.html.j2").read_text().split("<title>")[0]
    page.write_text(html.replace("{#", "<!--").replace("#}", "-->") +
                    "</head><body><script>undefinedFn();</script><img src='http://192.0.2.1/x.png'></body></html>")
    loaded = load_page(page)
    assert any("undefinedFn" in line for line in loaded.console), loaded.console
    assert any("Content Security Policy" in line for line in loaded.console), loaded.console
    assert loaded.figures == -1


def test_committed_gpu_examples_render(tmp_path, cli):
    for name, needle in (("h200_mpirun", "P2P/CUMEM"), ("h200_bisect_seed003", "; 11 stored results;"),
                         ("h200_bisect_seed003", "NCCL_NET=AWS Libfabric"), ("h200_transports", "Failed to initialize any NET plugin")):
        shutil.rmtree(tmp_path / name, ignore_errors=True)
        run = tmp_path / name
        shutil.copytree(REPO / "reports" / "examples" / name, run, ignore=shutil.ignore_patterns("report.html"))
        done = cli.run("report", name, "-o", f"{name}.html")  # relative to the cwd (cli.cwd is tmp_path)
        assert done.returncode == 0, done.stderr
        assert needle in (tmp_path / f"{name}.html").read_text()
        assert not (run / "report.html").exists()
        assert f"run directory <code>{name}</code>" in (tmp_path / f"{name}.html").read_text()


def test_report_bad_input_is_one_line_and_writes_nothing(cli, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    for target, text in ((tmp_path / "missing", "not a directory"), (empty, "no results.sqlite")):
        done = cli.run("report", str(target))
        assert done.returncode == 2, done.stdout + done.stderr
        assert text in done.stderr and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert list(empty.iterdir()) == []
