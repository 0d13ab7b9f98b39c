"""benchmarks/fidelity_table.py: ratio of medians, per-size target bands, pass/miss counts (issue 16)."""

import importlib.util
import pathlib

spec = importlib.util.spec_from_file_location("fidelity_table", pathlib.Path(__file__).parents[1] / "benchmarks" / "fidelity_table.py")
ft = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ft)


def test_bands_switch_at_64_kib():
    assert ft.target_band(65536) == (0.95, 1.05) and ft.target_band(65535) == (0.90, 1.10)
    assert ft.verdict(1.08, 4096) == "pass" and ft.verdict(1.08, 1 << 20) == "MISS" and ft.verdict(0.89, 8) == "MISS"


def test_table_uses_median_of_repeats_and_counts_misses():
    theirs = {("allreduce", 4096): [(15.7, 0.26), (13.1, 0.31)], ("alltoall", 1 << 20): [(20.0, 50.0), (22.0, 48.0)],
              ("broadcast", 8): [(5.0, 0.0)]}
    ours = {("allreduce", 4096): [(7.8, 0.53), (7.7, 0.53)], ("alltoall", 1 << 20): [(21.0, 49.0), (21.2, 48.5)]}
    text, passes, misses = ft.table("1x2", ours, theirs, "host vs default")
    rows = text.splitlines()[2:]
    assert len(rows) == 2 and (passes, misses) == (1, 1)  # broadcast measured on one side only: no row
    assert rows[0].startswith("| host vs default | 1x2 | allreduce | 4K | 14.4 (15.7/13.1) | 7.8 (7.8/7.7) | 0.538 |")
    assert rows[0].endswith("| 0.90-1.10 | MISS |") and rows[1].endswith("| 0.95-1.05 | pass |")


def test_reads_real_nccl_tests_stdout_out_of_place_under_envmatrix_names(tmp_path):
    data = pathlib.Path(__file__).parent / "data" / "nccl_tests"
    (tmp_path / "nt_default_r1_alltoall_perf.txt").write_text((data / "h200_alltoall_g4.txt").read_text())
    (tmp_path / "nt_default_r2_all_reduce_perf.txt").write_text((data / "h200_all_reduce_g4.txt").read_text())
    found = ft.nccl_tests_samples(str(tmp_path / "nt_default_r*_*.txt"))
    assert {c for c, _ in found} == {"allreduce", "alltoall"}
    assert all(len(v) == 1 and v[0][0] > 0 and v[0][1] > 0 for v in found.values())


def test_measured_side_may_be_another_nccl_tests_layout(tmp_path):
    # -g 2 in one process vs mpirun -np 2 -g 1: the reference compared with itself across process layouts
    data = pathlib.Path(__file__).parent / "data" / "nccl_tests"
    (tmp_path / "nt_mpi-default_r1_all_reduce_perf.txt").write_text((data / "h200_all_reduce_g4.txt").read_text())
    found, timings = ft.measured_samples(str(tmp_path / "nt_mpi-default_r*_*.txt"))
    assert timings == {"nccl-tests"} and {c for c, _ in found} == {"allreduce"}
    text, passes, misses = ft.table("1x2", found, ft.nccl_tests_samples(str(tmp_path / "nt_*.txt")))
    assert misses == 0 and passes == len(found) and " 1.000 |" in text.splitlines()[2]


def test_strata_take_the_ratio_within_each_machine():
    # two machines at different levels (7 us and 12 us at 8 B, as two lent H100 pairs read): both tools agree on
    # each, but pooled the sides' medians fall on different humps; within each machine the ratio is 1.00
    fast_em, fast_nt = [7.0, 7.1, 7.2, 7.3, 7.4], [7.0, 7.1, 7.2, 7.3, 7.4, 7.1, 7.2]
    slow_em, slow_nt = [12.0, 12.1, 12.2, 12.3, 12.4, 12.1, 12.2], [12.0, 12.1, 12.2, 12.3, 12.4]
    key = ("allreduce", 8)
    pooled, _, misses = ft.table("1x2", {key: [(t, 0.0) for t in fast_em + slow_em]}, {key: [(t, 0.0) for t in fast_nt + slow_nt]})
    assert misses == 1  # 12.1 / 7.3
    strata = [("m1", {key: [(t, 0.0) for t in fast_em]}, {key: [(t, 0.0) for t in fast_nt]}),
              ("m2", {key: [(t, 0.0) for t in slow_em]}, {key: [(t, 0.0) for t in slow_nt]})]
    text, passes, misses = ft.stratified_table("1x2", strata, "host")
    row = text.splitlines()[2]
    assert (passes, misses) == (1, 0) and "| 1.000 (5) | 1.000 (5) | 1.000 |" in row


def test_strata_keep_a_real_offset_and_weight_machines_by_processes():
    key = ("broadcast", 1 << 20)
    many = ("m1", {key: [(11.0, 0.0)] * 20}, {key: [(10.0, 0.0)] * 20})  # 1.10 on 20 processes
    few = ("m2", {key: [(10.0, 0.0)] * 2}, {key: [(10.0, 0.0)] * 2})  # 1.00 on 2
    text, passes, misses = ft.stratified_table("1x2", [many, few])
    assert misses == 1 and "| 1.091 | 1.09-1.09 |" in text.splitlines()[2]  # exp((20 ln 1.1 + 2 ln 1) / 22)
    text, _, _ = ft.stratified_table("1x2", [few, ("m3", {}, {key: [(9.0, 0.0)]})])  # m3: one side only
    assert "| 1.000 (2) | - | 1.000 |" in text.splitlines()[2]
