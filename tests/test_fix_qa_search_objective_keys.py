"""QA: an objective that gives both `collective` and `collectives` (or `size` and `sizes`) was run with one of them
silently dropped. `envmatrix search conf=search_demo "search.objective={collective: alltoall, size: 64K}"` merges
over the conf's `collectives: [allreduce, allgather]`, and the study optimised allreduce+allgather, exit 0. Both
given is now bad input: one line naming the two keys, exit 2, nothing written."""

from search_helpers import gloo_bench_search_conf, run_search

SPACE = "  space: {TORCH_DISTRIBUTED_DEBUG: [\"OFF\", INFO]}"


def test_collective_and_collectives_both_given_is_refused(cli, tmp_path):
    conf = gloo_bench_search_conf(tmp_path / "both.yaml", "both", SPACE)
    done = run_search(cli, "search", f"conf={conf}", "search.objective.collectives=[allreduce]", timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert "collective: 'allreduce' and collectives: ['allreduce'] both given" in line, done.stderr
    assert not (cli.cwd / "reports").exists()


def test_size_and_sizes_both_given_is_refused(cli, tmp_path):
    conf = gloo_bench_search_conf(tmp_path / "both.yaml", "both", SPACE)
    done = run_search(cli, "search", f"conf={conf}", "search.objective.sizes=[4K]", timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "size: '16K' and sizes: ['4K'] both given" in done.stderr.strip().splitlines()[-1], done.stderr
    assert not (cli.cwd / "reports").exists()
