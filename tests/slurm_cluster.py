"""A real one-node Slurm for tests: slurmctld + slurmd (+ munged when none runs) started with a minimal slurm.conf.

Debian's slurm-wlm + munge, no cgroup plugins, proctrack/linuxproc, task/none, cons_tres, this host; torn down
after (only the daemons the fixture started, by pid). Without the binaries or root it skips
(tests/data/slurm_attempt.md). ``slurm_allocation`` adds a real allocation (``salloc --no-shell``) whose
variables make srun run inside it, as a process started by salloc would see them.
"""

import os
import re
import shutil
import socket
import subprocess
import time

import pytest


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _munge_ok(env):
    try:
        enc = subprocess.run(["munge", "-n"], capture_output=True, env=env, timeout=10)
        dec = subprocess.run(["unmunge"], input=enc.stdout, capture_output=True, env=env, timeout=10)
        return enc.returncode == 0 and dec.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    needed = ("slurmctld", "slurmd", "munged", "srun", "salloc", "sinfo")
    if any(shutil.which(b) is None for b in needed) or os.geteuid() != 0:
        pytest.skip("real Slurm needs slurm-wlm + munge and root (see tests/data/slurm_attempt.md)")
    d = tmp_path_factory.mktemp("slurm")
    env = {**os.environ}
    started = []
    if not _munge_ok(env):
        for path in ("/etc/munge", "/var/lib/munge", "/var/log/munge", "/run/munge"):
            os.makedirs(path, exist_ok=True)
            shutil.chown(path, "munge", "munge")
        key = "/etc/munge/munge.key"
        if not os.path.exists(key):
            with open(key, "wb") as fh:
                fh.write(os.urandom(1024))
            shutil.chown(key, "munge", "munge")
            os.chmod(key, 0o400)
        subprocess.run(["munged", "--force", "--pid-file", str(d / "munged.pid")], check=True, capture_output=True)
        started.append(d / "munged.pid")
        assert _munge_ok(env), "munged did not start"
    host = socket.gethostname().split(".")[0]
    conf = d / "slurm.conf"
    conf.write_text(f"""ClusterName=envmx
SlurmctldHost={host}
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
NodeName={host} CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
""")
    (d / "state").mkdir()
    (d / "spool").mkdir()
    env["SLURM_CONF"] = str(conf)
    subprocess.run(["slurmctld", "-f", str(conf)], check=True, env=env, capture_output=True)
    started.append(d / "slurmctld.pid")
    subprocess.run(["slurmd", "-f", str(conf)], check=True, env=env, capture_output=True)
    started.append(d / "slurmd.pid")
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=env)
            if out.stdout.strip() == "idle":
                break
            time.sleep(0.5)
        else:
            pytest.skip(f"slurm node never became idle: {out.stdout.strip()} {out.stderr.strip()}")
        yield env
    finally:
        for pid_file in reversed(started):  # only the daemons this fixture started, by pid
            try:
                os.kill(int(pid_file.read_text().split()[0]), 15)
            except (OSError, ValueError):
                pass


@pytest.fixture(scope="module")
def slurm_allocation(slurm):
    """The env of a process inside a one-node, two-task allocation (overcommitted), cancelled afterwards."""
    done = subprocess.run(["salloc", "--no-shell", "-N1", "-n2", "--overcommit", "--job-name=envmatrix-test"],
                          capture_output=True, text=True, env=slurm, timeout=60)
    job = re.search(r"Granted job allocation (\d+)", done.stdout + done.stderr)
    assert job, done.stdout + done.stderr
    host = socket.gethostname().split(".")[0]
    env = {"SLURM_CONF": slurm["SLURM_CONF"], "SLURM_JOB_ID": job.group(1), "SLURM_JOB_NODELIST": host,
           "SLURM_JOB_NUM_NODES": "1", "SLURM_NNODES": "1", "SLURM_NODELIST": host}
    try:
        yield env
    finally:
        subprocess.run(["scancel", job.group(1)], env=slurm, capture_output=True, timeout=60)
