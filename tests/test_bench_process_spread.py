"""benchmarks/process_spread.py: one mean per process over the sizes every run measured (issue 40)."""

import importlib.util
import pathlib
import statistics

spec = importlib.util.spec_from_file_location("process_spread", pathlib.Path(__file__).parents[1] / "benchmarks" / "process_spread.py")
ps = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ps)

DATA = pathlib.Path(__file__).parent / "data" / "nccl_tests"


def _run(tmp_path, name, source):
    path = tmp_path / name
    path.write_text((DATA / source).read_text())
    return str(path)


def test_one_mean_per_process_over_the_small_sizes(tmp_path):
    # real nccl-tests stdout, 2xH200: out-of-place 8 B 32.64, 64 B 24.5, 512 B 24.94, 4 KiB 25.16, 32 KiB 24.6 us
    run = _run(tmp_path, "nt_a_r1_all_reduce_perf.txt", "h200_all_reduce_c0.txt")
    assert ps.common_sizes([run], "allreduce", 64, 32768) == {64, 512, 4096, 32768}
    assert ps.process_means([run], "allreduce", [64, 512, 4096, 32768]) == [statistics.fmean([24.5, 24.94, 25.16, 24.6])]
    assert ps.common_sizes([run], "allgather", 64, 32768) == set()


def test_only_sizes_every_run_measured_are_averaged(tmp_path):
    small = _run(tmp_path, "nt_a_r1_all_reduce_perf.txt", "h200_all_reduce_c0.txt")  # 8 B - 256 KiB
    large = _run(tmp_path, "nt_b_r1_all_reduce_perf.txt", "h200_all_reduce_g4.txt")  # 64 MiB - 1 GiB
    assert ps.common_sizes([small, large], "allreduce", 0, 1 << 30) == set()
    assert ps.common_sizes([large], "allreduce", 0, 1 << 30) == {64 << 20, 256 << 20, 1 << 30}


def test_main_prints_each_side_and_the_ratio_of_medians(tmp_path, capsys):
    ours = [_run(tmp_path, f"nt_ours_r{r}_all_reduce_perf.txt", "h200_all_reduce_c0.txt") for r in (1, 2)]
    _run(tmp_path, "nt_ref_r1_all_reduce_perf.txt", "h200_all_reduce_c0.txt")
    assert ps.main(["allreduce", str(tmp_path / "nt_ours_*"), str(tmp_path / "nt_ref_*")]) == 0
    out = capsys.readouterr().out
    assert "mean over 64, 512, 4096, 32768 B" in out and "envmatrix : 2 processes, median 24.8 us" in out
    assert "nccl-tests: 1 processes" in out and "ratio of medians envmatrix / nccl-tests: 1.000" in out
    assert ps.main(["allreduce", ours[0], str(tmp_path / "absent_*")]) == 0  # the envmatrix side alone
    assert "nccl-tests: no runs" in capsys.readouterr().out
    assert ps.main(["allreduce", str(tmp_path / "nt_ours_*"), str(tmp_path / "nt_ref_*"), "1048576", "2097152"]) == 1
