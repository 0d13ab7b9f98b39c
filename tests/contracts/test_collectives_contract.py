"""The collectives table is the only list of collectives: every row is runnable, parseable and has nccl-tests' factor."""

from __future__ import annotations

import pytest

from envmatrix.bench.formulas import ALL, COLLECTIVES, bandwidths
from envmatrix.parsers.nccl_tests import COLLECTIVE_OF_BINARY, collective_of
from envmatrix.rank import collective_timer

# Written out from NVIDIA nccl-tests doc/PERFORMANCE.md ("Bus bandwidth" section) and src/alltoall.cu /
# src/sendrecv.cu (not in the doc), independently of formulas.py.
NCCL_TESTS_BUS_FACTOR = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


@pytest.mark.parametrize("name", sorted(ALL))
def test_every_row_has_a_builder_in_the_rank_engine(name):
    builder = getattr(collective_timer, ALL[name].builder, None)
    assert callable(builder), f"{name}: collective_timer has no {ALL[name].builder}"
    assert collective_timer.BUILDERS[name] is builder


def test_engine_lists_no_collective_outside_the_table():
    assert set(collective_timer.BUILDERS) == set(ALL)
    assert not hasattr(collective_timer, "DIRECT_COLLECTIVES") and not hasattr(collective_timer, "_BLOCKING_ONLY")


@pytest.mark.parametrize("name", sorted(COLLECTIVES))
def test_every_collective_has_a_binary_the_parser_maps(name):
    binary = ALL[name].nccl_tests_binary
    assert binary and COLLECTIVE_OF_BINARY[binary] == name
    assert collective_of(f"./build/{binary}_mpi") == name


def test_parser_maps_no_binary_outside_the_table():
    assert set(COLLECTIVE_OF_BINARY.values()) <= set(ALL)
    # binaries nccl-tests ships that envmatrix never runs still get a name
    assert collective_of("gather_perf") == "gather" and collective_of("hypercube_perf") == "hypercube"


@pytest.mark.parametrize("name", sorted(NCCL_TESTS_BUS_FACTOR))
@pytest.mark.parametrize("ranks", [2, 3, 8, 16])
def test_busbw_factor_matches_nccl_tests(name, ranks):
    assert ALL[name].factor(ranks) == pytest.approx(NCCL_TESTS_BUS_FACTOR[name](ranks))
    algbw, busbw = bandwidths(name, 10**9, 10**6, ranks)  # 1 GB in 1 s
    assert algbw == pytest.approx(1.0) and busbw == pytest.approx(NCCL_TESTS_BUS_FACTOR[name](ranks))


def test_every_nccl_tests_collective_has_a_documented_factor():
    assert set(COLLECTIVES) == set(NCCL_TESTS_BUS_FACTOR)


def test_tuner_names_are_nccls_and_the_export_reads_them_from_the_table():
    from envmatrix.search.export import TUNER_COLLECTIVES

    # ncclFunc_t names the NCCL CSV tuner plugin (plugins/tuner/example) accepts as collective_type
    assert {s.tuner_name for s in ALL.values() if s.tuner_name} == {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"}
    assert TUNER_COLLECTIVES == {n: s.tuner_name for n, s in ALL.items() if s.tuner_name}


def test_blocking_patterns_are_measured_call_by_call():
    for name, spec in ALL.items():
        assert (collective_timer.effective_timing("host", name) == "blocking") == spec.blocking_only
