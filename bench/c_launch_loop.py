"""The C launch loops the issue 16 diagnoses call from inside a rank (bench/c_loop_diag.py,
bench/process_state_diag.py): compiled on the box with gcc, no torch needed to load them."""

import ctypes
import subprocess

C_SRC = r"""
#include <stdint.h>
typedef int (*fn6)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);
typedef int (*fn7)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);
typedef int (*group_fn)(void);
typedef int (*p2p_fn)(uint64_t, uint64_t, uint64_t, int, uint64_t, uint64_t);
/* every NCCL collective here takes 6 or 7 integer-class arguments, the stream last */
int loop_args(void* fn, int nargs, const uint64_t* a, int iters) {
  for (int i = 0; i < iters; i++) {
    int rc = nargs == 6 ? ((fn6)fn)(a[0], a[1], a[2], a[3], a[4], a[5])
                        : ((fn7)fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
    if (rc) return rc;
  }
  return 0;
}
/* nccl-tests' alltoall: one grouped send and receive per peer */
int loop_alltoall(void* start, void* send, void* recv, void* end, uint64_t sbuf, uint64_t rbuf, uint64_t step,
                  uint64_t count, uint64_t dtype, int world, uint64_t comm, uint64_t stream, int iters) {
  for (int i = 0; i < iters; i++) {
    int rc = ((group_fn)start)();
    for (int p = 0; p < world && !rc; p++) {
      rc = ((p2p_fn)send)(sbuf + p * step, count, dtype, p, comm, stream);
      if (!rc) rc = ((p2p_fn)recv)(rbuf + p * step, count, dtype, p, comm, stream);
    }
    int end_rc = ((group_fn)end)();
    if (rc || end_rc) return rc ? rc : end_rc;
  }
  return 0;
}
"""


def compile_loop(rank: int):
    src, so = f"/tmp/c_loop_{rank}.c", f"/tmp/c_loop_{rank}.so"
    with open(src, "w") as fh:
        fh.write(C_SRC)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", so, src], check=True)
    lib = ctypes.CDLL(so)
    lib.loop_args.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_uint64), ctypes.c_int]
    lib.loop_alltoall.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_uint64] * 5 + [ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int]
    return lib
