"""Summary of a rank-side diagnosis against nccl-tests in the same call (bench/h200x2_c_loop.sh,
`DIAG=launch_stream bash bench/h200x2_c_loop.sh`): one row per (collective, size), one time/ratio pair per variant in the order the
JSONL gives them; ratio = rank-mean us / median of nccl-tests' out-of-place times, judged on issue 16's bands.

Usage: python3 bench/diag_summary.py OUT JSONL   (OUT holds nt_<when>_<binary>.txt)
"""

import glob
import json
import statistics
import sys

from envmatrix.parsers.nccl_tests import parse_stdout

NAMES = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reduce_scatter",
         "alltoall": "alltoall", "broadcast": "broadcast"}


def band(size: int) -> tuple[float, float]:
    return (0.95, 1.05) if size >= 65536 else (0.90, 1.10)


def main(out: str, jsonl: str) -> None:
    ref: dict = {}
    for path in glob.glob(f"{out}/nt_*_*.txt"):
        binary = path.split("/")[-1].split("_", 2)[2][:-4]  # nt_<when>_<binary>.txt
        report = parse_stdout(open(path).read(), binary)
        for row in report.rows:
            if not row.in_place:
                ref.setdefault((NAMES.get(report.collective, report.collective), row.size_bytes), []).append(row.time_us)
    ours = [json.loads(line) for line in open(jsonl) if line.startswith('{"collective"')]
    variants = list(dict.fromkeys(r["variant"] for r in ours))
    by_key = {(r["collective"], r["size"], r["variant"]): r for r in ours}
    keys = sorted({(r["collective"], r["size"]) for r in ours}, key=lambda k: (list(NAMES.values()).index(k[0]), k[1]))
    passes = dict.fromkeys(variants, 0)
    print("| collective | size | nccl-tests us | " + " | ".join(f"{v} us | ratio" for v in variants) + " |")
    print("| --- | --- | --- | " + " | ".join("--- | ---" for _ in variants) + " |")
    for key in keys:
        nt = ref.get(key)
        if not nt:
            continue
        med = statistics.median(nt)
        cells = []
        for variant in variants:
            r = by_key[key + (variant,)]
            ratio = r["us"] / med
            ok = band(key[1])[0] <= ratio <= band(key[1])[1]
            passes[variant] += ok
            cells += [f"{r['us']:.1f}", f"{ratio:.3f} {'pass' if ok else 'MISS'}" + (f" wrong={r['wrong']}" if r["wrong"] else "")]
        print(f"| {key[0]} | {key[1]} | {'/'.join(f'{t:.1f}' for t in nt)} | " + " | ".join(cells) + " |")
    print(f"\npasses of {sum(1 for k in keys if k in ref)}: {passes}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
