import ctypes, os, sys, time
r = os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ.get("PMI_RANK") or os.environ.get("SLURM_PROCID") or os.environ.get("RANK")
mode = sys.argv[1]
if r == "1":
    if mode == "exit": sys.exit(3)
    if mode == "crash": ctypes.string_at(0)
time.sleep(3)
