"""envmatrix bench and benching sweeps, end to end with real gloo ranks."""

import json
import sqlite3

import pytest

from conftest import write_conf

pytestmark = pytest.mark.slow


def test_bench_command_on_two_emulated_nodes(cli, tmp_path):
    out = tmp_path / "b"
    done = cli.run(
        "bench", "backend=gloo", "--grid", "2x1", "-b", "1K", "-e", "16K", "-f", "4", "-n", "3", "-w", "1",
        "-c", "allreduce,allgather,reduce_scatter,alltoall,broadcast,sendrecv,p2p,ps_central,ps_sharded",
        "--env", "TORCH_DISTRIBUTED_DEBUG=OFF", "--out", str(out),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "busbw (GB/s) vs size" in done.stdout and "ps_sharded" in done.stdout
    (report,) = out.glob("bench_*.md")
    text = report.read_text()
    # torch's own allreduce/broadcast (gloo: no direct launches) and the parameter-server pattern run in place
    assert "## allreduce (in-place, timing: host)" in text and "| 16K |" in text
    assert "## allgather (out-of-place, timing: host)" in text and "## broadcast (in-place, timing: host)" in text
    assert "## ps_sharded (out-of-place, timing: blocking)" in text and "## ps_central (in-place, timing: blocking)" in text
    # sections in -c order, not alphabetical (issue 22 item 7)
    assert text.index("## allreduce") < text.index("## allgather") < text.index("## alltoall") < text.index("## broadcast")
    with sqlite3.connect(out / "results.sqlite") as db:
        rows = db.execute("SELECT collective, size_bytes, busbw_gbps, wrong FROM metrics").fetchall()
        in_place = dict(db.execute("SELECT DISTINCT collective, in_place FROM metrics").fetchall())
        timings = {json.loads(r)["timing"] for (r,) in db.execute("SELECT row_json FROM metrics")}
    assert timings == {"host", "blocking"}
    assert len(rows) == 9 * 3
    assert all(wrong == 0 for *_, wrong in rows)
    by = {(c, s): b for c, s, b, _ in rows}
    assert by[("ps_central", 1024)] is None and by[("allreduce", 1024)] > 0
    assert {c for c, ip in in_place.items() if ip} == {"allreduce", "broadcast", "ps_central"}


def test_bench_bad_flags_are_one_line_errors(cli, tmp_path):
    for args, text in (
        (["-c", "allreduse"], "allreduse"),
        (["-b", "lots"], "not a size"),
        (["--env", "NCCL_ALGO"], "KEY=VALUE"),
        (["--env", "NCCL_ALGO=Rung"], "'Rung'"),
        (["--grid", "9x9"], "9x9"),
        (["--grid", "1x20"], "allowed at most 16 (raise max_local_ranks=N"),  # the config's bound, as in sweep
        (["--timing", "graph"], "needs CUDA"),
    ):
        done = cli.run("bench", "backend=gloo", *args, "--out", str(tmp_path / "o"))
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert text in done.stderr and len(done.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "o").exists()


def test_sweep_with_bench_adds_busbw_tables(cli, tmp_path):
    conf = write_conf(
        tmp_path / "bs.yaml",
        """
backend: gloo
grids: [1x2]
setups:
  a: {}
  b: {TORCH_DISTRIBUTED_DEBUG: INFO}
probe:
  timeout_s: 120
  bench: {collectives: [allreduce, alltoall], min_bytes: 4K, max_bytes: 64K, factor: 16, iters: 3, warmup: 1}
""",
    )
    done = cli.run("sweep", f"conf={conf}", "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr
    md = (tmp_path / "o" / "matrix.md").read_text()
    assert "## busbw on 1x2" in md and "| busbw (GB/s) | (a) | (b) |" in md
    data = json.loads((tmp_path / "o" / "results.json").read_text())
    assert all(len(r["metrics"]) == 4 for r in data["results"])


def test_backends_side_by_side_refuses_nccl_without_gpus(cli, tmp_path):
    done = cli.run("bench", "--backends", "gloo,nccl", "--grid", "1x2", "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and "nccl needs GPUs" in done.stderr
    assert not (tmp_path / "o").exists()


def test_bench_needs_no_setups_in_its_config(cli, tmp_path):
    # bench measures the inherited env unless --setup names one: a config of only the cluster's lines (docs/network.md,
    # docs/pairs.md: hosts and launcher) was refused with 'no setups'
    conf = write_conf(tmp_path / "c.yaml", "backend: gloo\ngrids: [1x2]\n")
    done = cli.run("bench", f"conf={conf}", "-c", "allreduce", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0",
                   "--out", str(tmp_path / "b"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(env) 1x2 pass" in done.stdout


def test_bench_of_an_nccl_variable_on_gloo_warns_it_is_ignored_and_labels_the_setup_env(cli, tmp_path):
    # sweep/search/bisect warn that gloo never reads NCCL_*; bench measured it silently as "(env+env)"
    out = tmp_path / "g"
    done = cli.run("bench", "backend=gloo", "--grid", "1x2", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0",
                   "-c", "allreduce", "--env", "NCCL_ALGO=Ring", "--env", "TORCH_DISTRIBUTED_DEBUG=OFF", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert warnings == ["envmatrix: warning: backend gloo ignores NCCL_ALGO; results do not depend on them"], done.stderr
    (report,) = out.glob("bench_*.md")
    assert "envmatrix bench (env) on 1x2, gloo" in report.read_text() and "env+env" not in done.stdout
