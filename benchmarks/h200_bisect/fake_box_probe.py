# CPU stand-in for the 2xH200 box in the dry-run of benchmarks/h200x2_bisect.sh (--probe-cmd): the lines and stages the box printed.
import os, sys
# mimics the 2xH200 box: NET=IB fails at init, PAT rejected at first collective (with NCCL's echo of forced vars),
# P2P+SHM disabled together -> traffic over NET (forbidden)
e = os.environ
if e.get("NCCL_NET") == "IB":
    print("NCCL WARN Failed to initialize any NET plugin", flush=True); sys.exit(1)
if e.get("NCCL_ALGO") == "PAT":
    msg = "NCCL WARN Error : no algorithm/protocol available for function AllReduce with datatype ncclFloat32. NCCL_ALGO was set to PAT."
    if e.get("NCCL_PROTO"): msg += f" NCCL_PROTO was set to {e['NCCL_PROTO']}."
    print(msg, flush=True); sys.exit(1)
if e.get("NCCL_P2P_DISABLE") == "1" and e.get("NCCL_SHM_DISABLE") == "1":
    print("transport NET/Socket used, forbidden", flush=True); sys.exit(1)
sys.exit(0)
