"""NCCL log: the network devices each rank used (recorded NCCL 2.28.9 INFO log from the H200 box) and the
algorithm/protocol per collective from TUNING lines."""

from pathlib import Path

from envmatrix.parsers.nccl_log import algorithms_used, merge, parse_nccl_log

DATA = Path(__file__).parent / "data" / "nccl_logs"


def test_socket_device_from_a_recorded_h200_log():
    summary = parse_nccl_log((DATA / "h200_2x2_info_rank0.log").read_text())
    # "NET/IB : Using [RO]; OOB lo:..." names no IB device; "NET/Socket : Using [0]lo:127.0.0.1<0>" names lo
    assert summary.network == "Socket" and summary.net_devices == {"Socket": ["lo"]}


def test_ib_devices_keep_their_port():
    line = "node1:7:7 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/RoCE [RO]; OOB eth0:10.0.0.1<0>"
    assert parse_nccl_log(line).net_devices == {"IB": ["mlx5_0:1", "mlx5_3:1"]}


# NCCL 2.28 src/enqueue.cc: INFO(NCCL_TUNING, "%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}", ...),
# printed by rank 0 per collective call. No recorded GPU log with TUNING lines exists yet
# (benchmarks/h200x2_hang_topo.sh records one); these lines follow that format string.
TUNING = """\
h200:5344:5344 [0] NCCL INFO AllReduce: 8 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..0}
h200:5344:5344 [0] NCCL INFO AllReduce: 1073741824 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..31}
h200:5344:5344 [0] NCCL INFO AllReduce: 1073741824 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..31} comm 0x55a7a339db50
h200:5344:5344 [0] NCCL INFO AllGather: 65536 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..7}
"""


def test_tuning_lines_give_algorithm_and_protocol_per_collective():
    summary = parse_nccl_log(TUNING)
    assert [(t.collective, t.size_bytes, t.algorithm, t.protocol) for t in summary.tuning][:2] == [
        ("AllReduce", 8, "TREE", "LL"), ("AllReduce", 1073741824, "RING", "SIMPLE")]
    assert summary.tuning[3].channels == (0, 7)
    assert algorithms_used(summary.tuning) == {"AllReduce": {"TREE/LL": 1, "RING/SIMPLE": 2}, "AllGather": {"RING/LL128": 1}}
    assert summary.as_dict()["algorithms"] == algorithms_used(summary.tuning)
    assert len(merge([summary, parse_nccl_log("")]).tuning) == 4


def test_no_tuning_lines_no_algorithms():
    summary = parse_nccl_log((DATA / "h200_2x2_info_rank0.log").read_text())
    assert summary.tuning == [] and summary.as_dict()["algorithms"] == {}


def test_tuning_lines_recorded_on_the_h200_box():
    """NCCL 2.28.9's own lines (benchmarks/h200x2_hang_topo.sh, 1x2, 1 Mi floats: the hang runs' nccl tails, local
    launcher then mpirun): 4 MiB AllReduce and AllGather on RING/SIMPLE over channels 0..23."""
    summary = parse_nccl_log((DATA / "h200x2_2.28.9_tails.log").read_text())
    assert [(t.collective, t.size_bytes, t.algorithm, t.protocol, t.channels) for t in summary.tuning] == [
        ("AllReduce", 4194304, "RING", "SIMPLE", (0, 23)), ("AllGather", 4194304, "RING", "SIMPLE", (0, 23))] * 2
    assert algorithms_used(summary.tuning) == {"AllReduce": {"RING/SIMPLE": 2}, "AllGather": {"RING/SIMPLE": 2}}
