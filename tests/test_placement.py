"""Placement of a grid's ranks on GPUs (planning/placement.py, pure) and the host facts it is judged on."""

import pytest

from envmatrix.errors import PlanError
from envmatrix.execution.hostinfo import parse_gpu_capacity, visible_subset
from envmatrix.planning import Grid
from envmatrix.planning.grid import check_fits
from envmatrix.planning.placement import (
    CPU,
    GIB,
    ONE_PER_RANK,
    SHARED_GPU,
    check_capacity,
    place,
)

# nvidia-smi --query-gpu=compute_mode,memory.total --format=csv,noheader as printed on the lent H100 box, on an
# 8-GPU node with one GPU set exclusive (nvidia-smi -i 1 -c EXCLUSIVE_PROCESS), and on a GPU that hides its memory.
H100 = "Default, 81559 MiB\n"
EIGHT = "Default, 81559 MiB\nExclusive_Process, 81559 MiB\n" + "Default, 81559 MiB\n" * 6
HIDDEN = "Prohibited, [N/A]\n"


def test_parse_gpu_capacity_reads_mode_and_memory():
    assert parse_gpu_capacity(H100) == [{"compute_mode": "Default", "memory_mib": 81559}]
    assert [g["compute_mode"] for g in parse_gpu_capacity(EIGHT)][:3] == ["Default", "Exclusive_Process", "Default"]
    assert parse_gpu_capacity(HIDDEN) == [{"compute_mode": "Prohibited", "memory_mib": None}]
    assert parse_gpu_capacity("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver\n") == []


def test_visible_subset_follows_cuda_visible_devices():
    gpus = parse_gpu_capacity(EIGHT)
    assert visible_subset(gpus, {"CUDA_VISIBLE_DEVICES": "1,3"}) == [gpus[1], gpus[3]]
    assert visible_subset(gpus, {}) == gpus
    assert visible_subset(gpus, {"CUDA_VISIBLE_DEVICES": ""}) == []


def test_one_gpu_per_rank_is_todays_placement():
    p = place(Grid(2, 2), "nccl", 4)
    assert p.kind == ONE_PER_RANK and not p.shared and p.ranks_per_gpu == 1
    assert [r.device for r in p.ranks] == [0, 1, 2, 3]
    assert [r.host_id for r in p.ranks] == ["envmatrix-node0"] * 2 + ["envmatrix-node1"] * 2
    assert {r.hostname for r in p.ranks} == {None}  # the machine's own name is recorded
    assert p.label == "one-gpu-per-rank (4 ranks on 4 GPUs)"


def test_shared_gpu_places_ranks_round_robin_with_a_host_id_and_name_per_node():
    p = place(Grid(2, 4), "nccl", 3, emulate_hosts=True)
    assert p.kind == SHARED_GPU and p.shared and p.gpus == 3 and p.ranks_per_gpu == 3
    assert [r.device for r in p.ranks] == [0, 1, 2, 0, 1, 2, 0, 1]
    assert [r.hostname for r in p.ranks] == ["emh0"] * 4 + ["emh1"] * 4
    assert p.label == "shared-gpu (8 ranks on 3 GPUs)"
    # a node of 4 ranks on 3 GPUs: local ranks 0-2 and 3 are two NCCL hosts (NCCL refuses one host twice on a GPU)
    assert [r.host_id for r in p.ranks] == ["envmatrix-node0"] * 3 + ["envmatrix-node0.1"] + \
        ["envmatrix-node1"] * 3 + ["envmatrix-node1.1"]
    for host in {r.host_id for r in p.ranks}:
        devices = [r.device for r in p.ranks if r.host_id == host]
        assert len(devices) == len(set(devices)), host
    assert p.to_json() == {"kind": SHARED_GPU, "label": p.label, "ranks": 8, "gpus": 3, "ranks_per_gpu": 3,
                           "emulated_hosts": ["emh0", "emh1"], "nccl_hosts": 4}
    assert place(Grid(1, 4), "nccl", 1, emulate_hosts=True).label == "shared-gpu (4 ranks on 1 GPU)"


def test_one_node_needs_no_host_id_unless_its_ranks_share_a_gpu():
    p = place(Grid(1, 2), "nccl", 2, emulate_hosts=True)
    assert {r.host_id for r in p.ranks} == {None} and {r.hostname for r in p.ranks} == {"emh0"}
    assert p.to_json()["nccl_hosts"] == 1
    p = place(Grid(1, 4), "nccl", 1, emulate_hosts=True)  # seed 003's 1x4 on one GPU: four NCCL hosts, all NET
    assert [r.host_id for r in p.ranks] == ["envmatrix-node0", "envmatrix-node0.1", "envmatrix-node0.2", "envmatrix-node0.3"]
    assert {r.hostname for r in p.ranks} == {"emh0"} and p.nccl_hosts == 4


def test_emulated_hosts_on_cpu_name_the_hosts_without_devices():
    p = place(Grid(2, 2), "gloo", 0, emulate_hosts=True)
    assert p.kind == CPU and not p.shared and p.label == "cpu (4 ranks)"
    assert [(r.device, r.hostname) for r in p.ranks] == [(None, "emh0"), (None, "emh0"), (None, "emh1"), (None, "emh1")]


def test_grid_larger_than_the_gpus_is_refused_unless_hosts_are_emulated():
    with pytest.raises(PlanError) as err:
        check_fits([Grid(1, 4)], "nccl", 1, 16)
    assert str(err.value).startswith("grids: 1x4 needs 4 GPUs for NCCL (one rank per GPU) but 1 are visible")
    assert "--emulate-hosts" in str(err.value) and "\n" not in str(err.value)
    check_fits([Grid(1, 4), Grid(2, 4)], "nccl", 1, 16, emulate_hosts=True)


def test_exclusive_process_gpu_refuses_shared_ranks_in_one_line():
    caps = parse_gpu_capacity(EIGHT)
    check_capacity(place(Grid(2, 4), "nccl", 8, True), Grid(2, 4), caps, 0)  # one per GPU: nothing to judge
    with pytest.raises(PlanError) as err:
        check_capacity(place(Grid(2, 8), "nccl", 8, True), Grid(2, 8), caps, 0)
    assert str(err.value).startswith("grids: 2x8 shares GPU 1 among 2 ranks but its compute mode is Exclusive_Process")
    assert "\n" not in str(err.value)


def test_memory_too_small_for_the_ranks_is_refused_with_the_estimate():
    grid = Grid(2, 8)
    p = place(grid, "nccl", 1, True)
    caps = parse_gpu_capacity(H100)
    check_capacity(p, grid, caps, 64 << 20)  # 16 ranks of the checks fit in 80 GiB
    check_capacity(p, grid, caps, 4 * GIB)  # bench to 1 GiB: 16 x 4.75 GiB = 76 GiB still fit
    with pytest.raises(PlanError) as err:
        check_capacity(p, grid, caps, 8 * GIB)  # bench to 2 GiB: 16 x 8.75 GiB do not
    line = str(err.value)
    assert line == ("grids: 2x8 puts 16 ranks on GPU 0 needing about 140.0 GiB (8.75 GiB each: CUDA context, NCCL and "
                    "probe buffers) but it has 79.6 GiB; allowed: at most 9 ranks per GPU, or smaller probe sizes "
                    "(probe.bench.max_bytes)")


def test_unknown_capacity_refuses_nothing():
    p = place(Grid(2, 8), "nccl", 1, True)
    check_capacity(p, Grid(2, 8), [], 100 * GIB)
    check_capacity(p, Grid(2, 8), parse_gpu_capacity("Default, [N/A]\n"), 100 * GIB)


def test_busbw_tables_of_shared_gpu_runs_say_not_representative():
    from envmatrix.reporting.bench_tables import bench_markdown
    from envmatrix.reporting.formats import render_markdown
    from envmatrix.reporting.matrix import build_matrix
    from envmatrix.env.atoms import Setup
    from envmatrix.planning.plan import ProbeSpec, plan_runs
    from envmatrix.results import ProbeResult

    (run,) = plan_runs([Setup("ok", ())], [Grid(2, 1)], ProbeSpec("builtin"), "nccl", "local")
    shared = place(Grid(2, 1), "nccl", 1, emulate_hosts=True)
    row = {"collective": "allreduce", "size_bytes": 1 << 20, "count": 262144, "dtype": "float32", "time_us": 100.0,
           "algbw_gbps": 10.5, "busbw_gbps": 10.5, "wrong": 0, "in_place": False, "timing": "host"}
    result = ProbeResult(run_key=run.key, setup=run.setup.to_json(), grid="2x1", probe={"name": "builtin"},
                         backend="nccl", launcher="local", outcome="pass", metrics=[row], placement=shared.to_json())
    assert result.shared_gpu
    page = bench_markdown(result, "bench")
    assert "placement: shared-gpu (2 ranks on 1 GPU); **bandwidth not representative" in page
    matrix = render_markdown(build_matrix([run], [result], ["2x1"]), [result], "sweep")
    assert "## busbw on 2x1 (largest size benched): bandwidth not representative: ranks shared GPUs" in matrix
    alone = ProbeResult(**{**result.__dict__, "placement": place(Grid(2, 1), "nccl", 2, True).to_json()})
    assert "not representative" not in render_markdown(build_matrix([run], [alone], ["2x1"]), [alone], "sweep")
