"""A culprit whose failure names a file made per run under a temp directory (NCCL's /dev/shm/nccl-XXXXXX segment
when /dev/shm is too small): each run's line differed in that random name, so each failing probe looked like
another failure, and the bisect spent the probe cap naming nothing (exit 3, 28 probes, 15 atoms)."""

import random
import string

import pytest

from conftest import assert_no_processes, bisect_with_probe_script
from envmatrix.bisect import PASS
from envmatrix.bisect.peel import find_all_culprits
from envmatrix.bisect.signature import normalize


def shm_line(rng: random.Random) -> str:
    name = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(6))
    return f"NCCL WARN Error: failed to extend /dev/shm/nccl-{name} to 9637892 bytes"


def test_a_random_temp_file_name_is_not_part_of_the_signature():
    rng = random.Random(0)
    assert len({normalize(shm_line(rng)) for _ in range(20)}) == 1
    assert normalize("cannot open /tmp/tmpk2j3_x1a/store: refused") == normalize("cannot open /tmp/tmpq_9zz0ab/store: refused")
    # what sits elsewhere, or after the temp directory's own entry, still tells failures apart
    assert normalize("open /dev/shm/nccl-ab12cd failed") != normalize("open /tmp/nccl-ab12cd failed")
    assert normalize("cannot load /soft/a/libnccl-net.so") != normalize("cannot load /soft/b/libnccl-net.so")


@pytest.mark.parametrize("culprit", [0, 7, 14])
def test_a_culprit_failing_with_a_new_temp_name_each_run_is_found(culprit):
    rng = random.Random(culprit)
    res = find_all_culprits(15, lambda atoms: ("exit_error", normalize(shm_line(rng))) if culprit in atoms else PASS,
                            strict_after=True)
    assert res.status == "ok" and res.complete and res.culprits == [frozenset({culprit})], (res.status, res.probes)


SHM_PROBE = """
import os, sys, tempfile
if os.environ.get("NCCL_SHM_USE_CUDA_MEMCPY") == "1":
    fd, name = tempfile.mkstemp(prefix="nccl-", dir="/dev/shm")
    os.close(fd)
    os.unlink(name)
    print(f"NCCL WARN Error: failed to extend {name} to 9637892 bytes", flush=True)
    sys.exit(1)
"""


@pytest.mark.slow
def test_a_shm_culprit_with_real_ranks(cli, tmp_path):
    env = ["NCCL_DEBUG=WARN", "NCCL_NET_GDR_LEVEL=PHB", "NCCL_CROSS_NIC=1", "NCCL_COLLNET_ENABLE=1",
           "NCCL_SHM_USE_CUDA_MEMCPY=1", "FI_CXI_DISABLE_HOST_REGISTER=1", "FI_MR_CACHE_MONITOR=userfaultfd",
           "FI_CXI_DEFAULT_CQ_SIZE=131072", "FI_PROVIDER=cxi", "NCCL_IB_DISABLE=1"]
    done, report = bisect_with_probe_script(cli, tmp_path, SHM_PROBE, env, "--no-repair")
    assert done.returncode == 1, done.stdout + done.stderr
    assert report["culprits"] == [["NCCL_SHM_USE_CUDA_MEMCPY=1"]] and report["complete"]
    assert report["probes_launched"] <= 12
    assert_no_processes(cli.marker)
