"""``nvidia-smi topo -m`` parser on recorded text (tests/data/nvidia_topo: a DGX-1V's 8 V100s and 4 NICs)."""

from pathlib import Path

from envmatrix.parsers.nvidia_topo import link_rank, parse_topo_matrix

DGX1V = (Path(__file__).parent / "data" / "nvidia_topo" / "dgx1v_8gpu_topo_m.txt").read_text()


def test_dgx1v_hybrid_cube_mesh():
    topo = parse_topo_matrix(DGX1V)
    assert topo.gpus == list(range(8))
    assert len(topo.links) == 56  # every ordered pair, no NIC column taken for a GPU
    assert topo.link(0, 3) == "NV2" and topo.link(1, 7) == "SYS"  # seed 004's CUDA_VISIBLE_DEVICES=0,3 vs 1,7
    assert topo.link(0, 1) == "NV1" and topo.link(4, 7) == "NV2"
    assert all(topo.link(a, b) == topo.link(b, a) for a, b in topo.links)
    assert sorted(set(topo.links.values())) == ["NV1", "NV2", "SYS"]
    assert topo.cpu_affinity[0] == "0-19,40-59" and topo.cpu_affinity[7] == "20-39,60-79"


def test_two_pcie_gpus_with_spaces_and_no_gpus():
    text = "        GPU0    GPU1    CPU Affinity    NUMA Affinity\nGPU0     X      PHB     0-31    0\nGPU1    PHB      X      0-31    0\n"
    topo = parse_topo_matrix(text)
    assert topo.links == {(0, 1): "PHB", (1, 0): "PHB"}
    assert parse_topo_matrix("No devices were found").links == {}
    assert parse_topo_matrix("").gpus == []


def test_link_order_puts_more_nvlinks_first():
    labels = ["SYS", "PIX", "NV1", "NODE", "NV18", None, "PHB", "PXB"]
    assert sorted(labels, key=link_rank) == ["NV18", "NV1", "PIX", "PXB", "PHB", "NODE", "SYS", None]


def test_pair_transports_from_nccl_logs():
    from envmatrix.parsers.nccl_log import device_pair_transports

    seed004 = ("x:1:1 [0] NCCL INFO Channel 00 : 1[b000] -> 0[6000] via P2P/IPC\n"
               "x:1:1 [0] NCCL INFO Channel 01 : 0[6000] -> 1[b000] via P2P/IPC\n"
               "x:1:1 [0] NCCL INFO Channel 00 : 1[8a000] -> 0[7000] via direct shared memory\n")
    assert device_pair_transports(seed004) == {("b000", "6000"): "P2P/IPC", ("6000", "b000"): "P2P/IPC",
                                               ("8a000", "7000"): "direct shared memory"}
    h200 = (Path(__file__).parent / "data" / "nccl_logs" / "h200_2x2_info_rank0.log").read_text()
    pairs = device_pair_transports(h200)
    assert pairs[("3", "0")] == "NET/Socket" and pairs[("0", "1")] == "P2P/CUMEM"
    # connection index 1 (point-to-point) wins over the rings' index 0 where both exist
    mixed = ("a [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n"
             "a [0] NCCL INFO Channel 00/1 : 0[0] -> 2[2] via SHM/direct/direct\n")
    assert device_pair_transports(mixed) == {("0", "2"): "SHM"}
