"""QA of envmatrix bench against nccl-tests' table, with real gloo ranks on an odd rank count (3).

A wrong result is made by a real fault inside the rank processes, not a mock: the setup's own PYTHONPATH puts a
sitecustomize in front of every rank's interpreter that corrupts one element of each all_reduce result on rank 1.
"""

import os
import sqlite3

import pytest

pytestmark = pytest.mark.slow

CORRUPT_RANK_1 = '''
try:
    import torch.distributed as dist
except Exception:  # the pooled server may start before torch is importable: no fault then
    dist = None
if dist is not None:
    _all_reduce = dist.all_reduce

    def all_reduce(tensor, *args, **kwargs):
        work = _all_reduce(tensor, *args, **kwargs)
        if dist.get_rank() == 1 and tensor.numel() > 1:  # barriers reduce one element: leave them alone
            tensor.view(-1)[0] += 7
        return work

    dist.all_reduce = all_reduce
'''


def test_bench_on_3_ranks_counts_like_nccl_tests_and_flags_a_corrupting_rank(cli, tmp_path):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(CORRUPT_RANK_1)
    out = tmp_path / "b"
    # the ranks keep whatever PYTHONPATH the driver was given, so they import the same envmatrix as it does
    pythonpath = os.pathsep.join(filter(None, (str(hook), os.environ.get("PYTHONPATH"))))
    done = cli.run("bench", "backend=gloo", "--grid", "1x3", "-b", "100", "-e", "100", "-n", "2", "-w", "0",
                   "-c", "allreduce,allgather,alltoall", "--env", f"PYTHONPATH={pythonpath}", "--out", str(out))
    assert done.returncode == 1, done.stdout + done.stderr  # documented: a value check with #wrong fails the run
    assert "wrong_result" in done.stdout and "allreduce@100: 1 of 25 elements wrong" in done.stdout
    with sqlite3.connect(out / "results.sqlite") as db:
        rows = {c: (s, n, t, a, b, w) for c, s, n, t, a, b, w in db.execute(
            "SELECT collective, size_bytes, json_extract(row_json, '$.count'), time_us, algbw_gbps, busbw_gbps, wrong "
            "FROM metrics")}
    # 100 B of float32 is 25 elements; gather-like collectives keep 25 // 3 * 3 = 24 (96 B), and nccl-tests' count
    # column is then the per-rank count, 8, as its parser stores it for all_gather_perf / alltoall_perf output
    assert {c: r[:2] for c, r in rows.items()} == {"allreduce": (100, 25), "allgather": (96, 8), "alltoall": (96, 8)}
    assert rows["allreduce"][5] == 1 and rows["allgather"][5] == 0 and rows["alltoall"][5] == 0
    for collective, factor in (("allreduce", 4 / 3), ("allgather", 2 / 3), ("alltoall", 2 / 3)):
        size, _, time_us, algbw, busbw, _ = rows[collective]
        assert algbw == pytest.approx(size / time_us / 1e3) and busbw == pytest.approx(algbw * factor)
    (report,) = out.glob("bench_*.md")
    text = report.read_text()
    assert "| 96 | 8 | float32 |" in text and "| 100 | 25 | float32 |" in text and "outcome wrong_result" in text
    assert text.split("## allreduce", 1)[1].split("\n## ", 1)[0].rstrip().endswith("| 1 |")  # #wrong column
