"""QA of search.objective, two defects:

1. QA: an objective that gives both `collective` and `collectives` (or `size` and `sizes`) was run with one of them
silently dropped. `envmatrix search conf=search_demo "search.objective={collective: alltoall, size: 64K}"` merges
over the conf's `collectives: [allreduce, allgather]`, and the study optimised allreduce+allgather, exit 0. Both
given is now bad input: one line naming the two keys, exit 2, nothing written.

2. QA: an objective size between probe.bench's steps was accepted (only sizes above max_bytes were refused):
`envmatrix search conf=search_demo search.objective.size=3K` (bench 4K, 16K, 64K) launched every trial, each failed
with no_metric ('no allreduce row at 3K on 1x2'), exit 1 and a run directory written. Now bad input before any
trial: one line naming the size and the sizes the bench measures, exit 2, nothing written."""

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


def test_objective_size_off_the_bench_grid_is_refused(cli, tmp_path):
    conf = gloo_bench_search_conf(tmp_path / "off.yaml", "off", SPACE)
    done = run_search(cli, "search", f"conf={conf}", "search.objective.size=8K", timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert "search.objective.size: 8K is not a size probe.bench measures; allowed: max or one of 4K, 16K" in line, line
    assert not (cli.cwd / "reports").exists()


def test_objective_size_on_the_grid_is_accepted(cli, tmp_path):
    conf = gloo_bench_search_conf(tmp_path / "on.yaml", "on", SPACE)
    done = run_search(cli, "search", f"conf={conf}", "search.objective.size=4K", "--dry-run", timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
