#!/usr/bin/env bash
# Issue 20 items 2 and 4 on the 2xH200 box, ~80 s (caps 50 + 60 + 60 s: at most 3 min), run from the repo root with .whl carried:
# (1) passing nccl sweep 1x2 + 2x1 (local launcher): every rank record's hostname, GPU UUID, PCI bus id and NIC,
#     the algorithm/protocol per collective from NCCL's TUNING lines, NCCL_TOPO/GRAPH_DUMP_FILE written to the run dir;
#     rank 0's raw NCCL INFO log is kept as a recorded TUNING sample (commit it as
#     tests/data/nccl_logs/h200_1x2_tuning_rank0.log and point tests/test_nccl_log_tuning.py at it);
# (2) the same 1x2 with rank 1 stalled before its 2nd collective (probe.stall), local launcher and mpirun: the
#     hang line, every rank's stack and NCCL tail, and NCCL 2.28's RAS status from localhost:28028 (first real
#     answer of the RAS client, recorded as tests/data/nccl_ras/status_2.28.9.txt). Expected since 8a3a2b6+i20d: the
#     hang line names rank 1 (stall_here) in both cases, with NCCL RAS's operation counts; under mpirun
#     hang.signalled_directly says whether mpirun passed SIGUSR1 on (empty) or the driver had to signal the ranks
#     itself, and the launcher log shows the shim's "passing signal 10" lines when mpirun forwarded it.
# Outputs in $OUT (the device tool returns at most 8 files): summary.txt and hang_topo.tgz (console.log, every
# case's run dirs with rank logs, stacks and launcher logs, results.json and matrix.md, tuning_rank0.log, ras.txt,
# the topology/graph dumps, mpirun's version and its signal-forwarding parameters).
# CPU dry-run of this script (gloo instead of nccl; no TUNING/RAS/dumps): OUT=/tmp/o DRY_BACKEND=gloo SKIP_BOX_ENV=1 bash benchmarks/h200x2_hang_topo.sh
set -uo pipefail
[ -n "${SKIP_BOX_ENV:-}" ] || source benchmarks/box_env.sh
dry=(); [ -n "${DRY_BACKEND:-}" ] && dry=(backend="$DRY_BACKEND")
W=/tmp/h20d; rm -rf "$W"; mkdir -p "$W/keep"
{
  echo "== (1) passing sweep, identity + TUNING + topology dumps"
  time timeout 50 python3 -m envmatrix sweep conf=benchmarks/h200x2_hang_topo.yaml "${dry[@]}" --out "$W/pass"; echo "rc=$?"
  echo "== (2a) hang, local launcher"
  time timeout 60 python3 -m envmatrix sweep conf=benchmarks/h200x2_hang_topo.yaml "${dry[@]}" 'grids=[1x2]' probe.timeout_s=25 \
    'probe.stall={rank: 1, seq: 2}' --out "$W/hang_local"; echo "rc=$?"
  echo "== (2b) hang, mpirun"
  time timeout 60 python3 -m envmatrix sweep conf=benchmarks/h200x2_hang_topo.yaml "${dry[@]}" 'grids=[1x2]' probe.timeout_s=25 \
    'probe.stall={rank: 1, seq: 2}' launcher=mpirun --out "$W/hang_mpirun"; echo "rc=$?"
  echo "== mpirun version and signal forwarding (OpenMPI forwards SIGUSR1 to its ranks by default)"
  mpirun --version 2>&1 | head -1; ompi_info --param ess base --level 9 2>&1 | grep -i forward
} > "$W/keep/console.log" 2>&1
python3 - "$W" "$W/keep" > "$OUT/summary.txt" 2>&1 <<'PY'
import json, os, shutil, sys
w, out = sys.argv[1:]
for case in ("pass", "hang_local", "hang_mpirun"):
    path = f"{w}/{case}/results.json"
    if not os.path.exists(path):
        print(case, "no results.json"); continue
    for r in json.load(open(path))["results"]:
        print(f"== {case} {r['grid']} {r['outcome']} {r['duration_s']:.1f}s root cause: {r['root_cause'].get('line')}")
        for k in r["ranks"]:
            print(f"   rank {k['rank']} node {k['node']} local {k['local_rank']} host {k['hostname']} gpu {k['gpu_uuid']} "
                  f"pci {k['pci_bus_id']} nic {k['nic']} ({k['nic_source']}) progress {k['progress']}")
        nccl = r.get("nccl", {})
        print("   algorithms:", nccl.get("algorithms"), "dumps:", nccl.get("topo_dump"), nccl.get("graph_dump"))
        for key in ("topo_dump", "graph_dump"):
            if nccl.get(key) and not os.path.exists(f"{out}/{os.path.basename(nccl[key])}"):
                shutil.copy(nccl[key], out)
        if case == "pass" and r["grid"] == "1x2" and r["ranks"][0].get("log_path"):
            shutil.copy(r["ranks"][0]["log_path"], f"{out}/tuning_rank0.log")
        hang = r.get("hang") or {}
        if hang:
            print("   hang:", hang.get("line"), "| ras:", hang.get("ras_line"), "| signalled directly:", hang.get("signalled_directly"))
            for rank, info in hang["ranks"].items():
                print(f"   rank {rank}: {info['collective']} at {info['frame']}; nccl tail: {info['nccl_tail'][-2:]}")
            if hang.get("ras") and not os.path.exists(f"{out}/ras.txt"):
                open(f"{out}/ras.txt", "w").write(hang["ras"])
    shutil.copy(f"{w}/{case}/matrix.md", f"{out}/{case}_matrix.md")
PY
grep -h -e "Forwarding signal" -e "envmatrix shim: passing" -r --include="*.log" "$W/hang_mpirun" >> "$OUT/summary.txt" || echo "neither mpirun nor a shim said it forwarded the stack request" >> "$OUT/summary.txt"
tar -czf "$OUT/hang_topo.tgz" -C "$W" --exclude='*.sqlite*' keep pass hang_local hang_mpirun
tail -n 40 "$OUT/summary.txt"
