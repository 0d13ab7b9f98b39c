#!/usr/bin/env bash
# Issue 20 items 2 and 4 on the 2xH200 box, ~3 min (caps 150 + 150 + 150 s), run from the repo root with .whl carried:
# (1) passing nccl sweep 1x2 + 2x1 (local launcher): every rank record's hostname, GPU UUID, PCI bus id and NIC,
#     the algorithm/protocol per collective from NCCL's TUNING lines, NCCL_TOPO/GRAPH_DUMP_FILE written to the run dir;
#     rank 0's raw NCCL INFO log is kept as a recorded TUNING sample (commit it as
#     tests/data/nccl_logs/h200_1x2_tuning_rank0.log and point tests/test_nccl_log_tuning.py at it);
# (2) the same 1x2 with rank 1 stalled before its 2nd collective (probe.stall), local launcher and mpirun: the
#     hang line, every rank's stack and NCCL tail, and NCCL 2.28's RAS status from localhost:28028 (first real
#     answer of the RAS client; commit ras.txt as tests/data/nccl_ras/status_2.28.9.txt for the parser test).
# Outputs in $OUT: console.log, summary.txt, matrix.md per case, tuning_rank0.log, ras.txt, nccl_topo.xml, nccl_graph.xml.
# CPU dry-run of this script (gloo instead of nccl; no TUNING/RAS/dumps): OUT=/tmp/o DRY_BACKEND=gloo SKIP_BOX_ENV=1 bash bench/h200x2_hang_topo.sh
set -uo pipefail
[ -n "${SKIP_BOX_ENV:-}" ] || source bench/box_env.sh
dry=(); [ -n "${DRY_BACKEND:-}" ] && dry=(backend="$DRY_BACKEND")
W=/tmp/h20c; rm -rf "$W"; mkdir -p "$W"
{
  echo "== (1) passing sweep, identity + TUNING + topology dumps"
  time timeout 150 python3 -m envmatrix sweep conf=bench/h200x2_hang_topo.yaml "${dry[@]}" --out "$W/pass"; echo "rc=$?"
  echo "== (2a) hang, local launcher"
  time timeout 150 python3 -m envmatrix sweep conf=bench/h200x2_hang_topo.yaml "${dry[@]}" 'grids=[1x2]' probe.timeout_s=40 \
    'probe.stall={rank: 1, seq: 2}' --out "$W/hang_local"; echo "rc=$?"
  echo "== (2b) hang, mpirun"
  time timeout 150 python3 -m envmatrix sweep conf=bench/h200x2_hang_topo.yaml "${dry[@]}" 'grids=[1x2]' probe.timeout_s=40 \
    'probe.stall={rank: 1, seq: 2}' launcher=mpirun --out "$W/hang_mpirun"; echo "rc=$?"
} > "$OUT/console.log" 2>&1
python3 - "$W" "$OUT" > "$OUT/summary.txt" 2>&1 <<'PY'
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
            print("   hang:", hang.get("line"), "| ras:", hang.get("ras_line"))
            for rank, info in hang["ranks"].items():
                print(f"   rank {rank}: {info['collective']} at {info['frame']}; nccl tail: {info['nccl_tail'][-2:]}")
            if hang.get("ras") and not os.path.exists(f"{out}/ras.txt"):
                open(f"{out}/ras.txt", "w").write(hang["ras"])
    shutil.copy(f"{w}/{case}/matrix.md", f"{out}/{case}_matrix.md")
PY
tail -n 40 "$OUT/summary.txt"
