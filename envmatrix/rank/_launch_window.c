/* nccl-tests' default timed window, in compiled code (issue 16).

   Why: at small messages nccl-tests' host-clock window is bound by the host cost of each launch, and a Python
   loop of the same ncclAllReduce calls costs 1.2-3 us more per launch than nccl-tests' C loop on 2xH200
   (benchmarks/fidelity_h200.md). These functions run the whole window as nccl-tests' common.cu does: clock,
   `iters` launches, a spin on cudaStreamQuery that checks ncclCommGetAsyncError and yields the CPU while the
   stream is busy (testStreamSynchronize), clock.

   No header of NCCL or CUDA is needed: the rank passes the addresses of the functions in the very libnccl and
   libcudart torch loaded (envmatrix/rank/launch_window.py); their C signatures are nccl.h's and
   cuda_runtime_api.h's. Built at install time as an optional extension (setup.py); loaded with ctypes, never
   imported, so it includes no Python header either.

   Iteration i reads and writes its buffers `stride` bytes further for each step, modulo `steps`, as nccl-tests'
   startColl shifts them (so that a window does not time the same bytes over and over in the GPU's cache).

   Return value: 0, an NCCL error code from a launch or from ncclCommGetAsyncError (> 0), or minus the CUDA
   error code of cudaStreamQuery or cudaGraphLaunch (< 0). *elapsed_ns is the window in nanoseconds when 0 is returned. */

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* ncclAllReduce, ncclReduceScatter (op) and ncclBroadcast (root): send, recv, count, datatype, op/root, comm, stream */
typedef int (*with_int_fn)(const void *, void *, size_t, int, int, void *, void *);
/* ncclAllGather: send, recv, sendcount, datatype, comm, stream */
typedef int (*gather_fn)(const void *, void *, size_t, int, void *, void *);
/* ncclSend / ncclRecv: buffer, count, datatype, peer, comm, stream */
typedef int (*p2p_fn)(void *, size_t, int, int, void *, void *);
typedef int (*group_fn)(void);
typedef int (*query_fn)(void *);                 /* cudaStreamQuery */
typedef int (*async_error_fn)(void *, int *);    /* ncclCommGetAsyncError */

enum { CUDA_SUCCESS = 0, CUDA_ERROR_NOT_READY = 600 };

struct em_drain {
    void *stream_query;      /* cudaStreamQuery */
    void *comm_async_error;  /* ncclCommGetAsyncError */
};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* nccl-tests' testStreamSynchronize for one stream */
static int drain(const struct em_drain *d, void *comm, void *stream) {
    for (;;) {
        int rc = ((query_fn)d->stream_query)(stream);
        if (rc == CUDA_SUCCESS) return 0;
        if (rc != CUDA_ERROR_NOT_READY) return -rc;
        int async_rc = 0;
        int nccl_rc = ((async_error_fn)d->comm_async_error)(comm, &async_rc);
        if (nccl_rc) return nccl_rc;
        if (async_rc) return async_rc;
        sched_yield();  /* nccl-tests: let other threads (NCCL's proxy included) use the CPU */
    }
}

/* the end of every window: the drain, then the clock */
static int finish(const struct em_drain *d, void *comm, void *stream, int64_t t0, int64_t *elapsed_ns) {
    int rc = drain(d, comm, stream);
    *elapsed_ns = now_ns() - t0;
    return rc;
}

int em_window_with_int(const struct em_drain *d, void *fn, const char *send, char *recv, size_t count, int dtype,
                       int op_or_root, void *comm, void *stream, size_t stride, int steps, int iters,
                       int64_t *elapsed_ns) {
    int64_t t0 = now_ns();
    for (int i = 0; i < iters; i++) {
        size_t shift = (size_t)(i % steps) * stride;
        int rc = ((with_int_fn)fn)(send + shift, recv + shift, count, dtype, op_or_root, comm, stream);
        if (rc) return rc;
    }
    return finish(d, comm, stream, t0, elapsed_ns);
}

int em_window_gather(const struct em_drain *d, void *fn, const char *send, char *recv, size_t count, int dtype,
                     void *comm, void *stream, size_t stride, int steps, int iters, int64_t *elapsed_ns) {
    int64_t t0 = now_ns();
    for (int i = 0; i < iters; i++) {
        size_t shift = (size_t)(i % steps) * stride;
        int rc = ((gather_fn)fn)(send + shift, recv + shift, count, dtype, comm, stream);
        if (rc) return rc;
    }
    return finish(d, comm, stream, t0, elapsed_ns);
}

/* nccl-tests' alltoall: one group of a send and a receive of `count` elements per peer, `step` bytes apart */
int em_window_alltoall(const struct em_drain *d, void *group_start, void *group_end, void *send_fn, void *recv_fn,
                       const char *send, char *recv, size_t count, size_t step, int dtype, int world, void *comm,
                       void *stream, size_t stride, int steps, int iters, int64_t *elapsed_ns) {
    int64_t t0 = now_ns();
    for (int i = 0; i < iters; i++) {
        size_t shift = (size_t)(i % steps) * stride;
        int rc = ((group_fn)group_start)();
        for (int peer = 0; peer < world && !rc; peer++) {
            rc = ((p2p_fn)send_fn)((void *)(send + shift + peer * step), count, dtype, peer, comm, stream);
            if (!rc) rc = ((p2p_fn)recv_fn)(recv + shift + peer * step, count, dtype, peer, comm, stream);
        }
        int end_rc = ((group_fn)group_end)();
        if (rc || end_rc) return rc ? rc : end_rc;
    }
    return finish(d, comm, stream, t0, elapsed_ns);
}

typedef int (*graph_launch_fn)(void *, void *);  /* cudaGraphLaunch(graphExec, stream) */

/* nccl-tests -G: `launches` launches of one instantiated graph (the first uploads it), then the same drain.
   A CUDA error of cudaGraphLaunch comes back negated, as cudaStreamQuery's does. */
int em_window_graph(const struct em_drain *d, void *graph_launch, void *graph_exec, void *comm, void *stream,
                    int launches, int64_t *elapsed_ns) {
    int64_t t0 = now_ns();
    for (int i = 0; i < launches; i++) {
        int rc = ((graph_launch_fn)graph_launch)(graph_exec, stream);
        if (rc) return -rc;
    }
    return finish(d, comm, stream, t0, elapsed_ns);
}
