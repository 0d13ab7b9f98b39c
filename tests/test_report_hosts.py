"""Reports group rank records by host: the host of each failure's root-cause rank and a per-host table
(console, markdown, HTML), plus the algorithm NCCL's TUNING lines say each collective ran with."""

from rich.console import Console

from envmatrix.reporting.console import matrix_tables
from envmatrix.reporting.formats import render_markdown
from envmatrix.reporting.hosts import algorithms_line, host_rows
from envmatrix.reporting.html import render_html
from envmatrix.reporting.html_model import RunData
from envmatrix.reporting.matrix import Failure, Matrix
from envmatrix.results import ProbeResult, RankResult


def _result(key, outcome, cause_rank, hosts, failed=()):
    ranks = [RankResult(rank=r, node=r // 2, local_rank=r % 2, hostname=h, gpu_uuid="cpu", nic="eth0",
                        outcome="timeout" if r in failed else "peer_killed" if outcome != "pass" else "pass")
             for r, h in enumerate(hosts)]
    cause = {} if outcome == "pass" else {"rank": cause_rank, "outcome": outcome, "line": f"rank {cause_rank} stuck"}
    return ProbeResult(run_key=key, setup={"name": key, "atoms": []}, grid="2x2", probe={}, backend="gloo",
                       launcher="mpirun", outcome=outcome, root_cause=cause, ranks=ranks,
                       nccl={"algorithms": {"AllReduce": {"RING/SIMPLE": 3, "TREE/LL": 1}}} if outcome == "pass" else {})


RESULTS = [
    _result("ok", "pass", None, ["h1", "h1", "h2", "h2"]),
    _result("bad", "timeout", 3, ["h1", "h1", "h2", "h2"], failed={3}),
]


def test_host_rows_count_ranks_failures_and_root_causes():
    rows = {r.host: r for r in host_rows(RESULTS)}
    assert list(rows) == ["h1", "h2"]
    assert (rows["h1"].runs, rows["h1"].ranks, rows["h1"].failed_ranks, rows["h1"].root_causes) == (2, 4, 0, 0)
    assert (rows["h2"].runs, rows["h2"].ranks, rows["h2"].failed_ranks, rows["h2"].root_causes) == (2, 4, 1, 1)
    assert rows["h2"].gpus == ["cpu"] and rows["h2"].nics == ["eth0"]
    assert host_rows([_result("x", "pass", None, [None, None])]) == []


def test_algorithms_line_most_used_first():
    assert algorithms_line(RESULTS[0].nccl) == "AllReduce RING/SIMPLE x3, TREE/LL x1"
    assert algorithms_line({}) == ""


def _matrix():
    return Matrix(["ok", "bad"], ["2x2"], {("2x2", "ok"): RESULTS[0], ("2x2", "bad"): RESULTS[1]}, [],
                  [Failure("bad", "2x2", "timeout", 3, "rank 3 stuck", "h2")])


def test_console_and_markdown_show_the_host():
    console = Console(width=200, record=True)
    console.print(matrix_tables(_matrix(), "t", RESULTS))
    text = console.export_text()
    assert "hosts (every rank record" in text and "rank 3 stuck" in text
    failure_row = next(line for line in text.splitlines() if "rank 3 stuck" in line)
    assert [c.strip() for c in failure_row.split("│")[1:6]] == ["(bad)", "2x2", "timeout", "3", "h2"]
    md = render_markdown(_matrix(), RESULTS, "t")
    assert "| (bad) | 2x2 | timeout | 3 | h2 | rank 3 stuck |" in md
    assert "| h2 | 2 | 4 | 1 | 1 | cpu | eth0 |" in md
    assert "| (ok) | 2x2 | AllReduce RING/SIMPLE x3, TREE/LL x1 |" in md


def test_html_has_host_column_and_hosts_table(tmp_path):
    page = render_html(RunData(str(tmp_path), results=RESULTS))
    assert "<td>h2</td><td>-</td><td>rank 3 stuck</td>" in page
    assert '<h3 id="hosts">' in page and "<td>h2</td><td>2</td><td>4</td><td>1</td><td>1</td>" in page
    assert "AllReduce RING/SIMPLE x3, TREE/LL x1" in page
