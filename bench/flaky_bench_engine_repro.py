"""Run test_bench_engine's SCRIPT N times (argv[1]) in fresh interpreters; count aborts (issue 22.8)."""
import os, socket, subprocess, sys
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import importlib.util
spec = importlib.util.spec_from_file_location("tbe", os.path.join(REPO, "tests", "test_bench_engine.py")); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
script = m.SCRIPT
bad = 0
for i in range(int(sys.argv[1])):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    d = subprocess.run([sys.executable, "-c", script, str(port)], capture_output=True, text=True, env={**os.environ, "GLOO_SOCKET_IFNAME": "lo"}, timeout=120)
    if d.returncode != 0 or "terminate" in d.stderr:
        bad += 1; print("rc", d.returncode, d.stderr[-300:])
print("bad", bad)
