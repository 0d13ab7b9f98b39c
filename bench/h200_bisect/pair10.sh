# Issue 11: the interacting pair P2P+SHM disabled (-> NET/Socket, forbidden by probe.forbid_transport=[NET])
# among 10 harmless real NCCL variables, on 1x2.
export NCCL_DEBUG=WARN
export NCCL_BUFFSIZE=4194304
export NCCL_P2P_DISABLE=1
export NCCL_SOCKET_NTHREADS=2
export NCCL_NSOCKS_PERTHREAD=2
export NCCL_MIN_NCHANNELS=2
export NCCL_SHM_DISABLE=1
export NCCL_CHECK_POINTERS=0
export NCCL_IGNORE_CPU_AFFINITY=1
export NCCL_LAUNCH_MODE=PARALLEL
export NCCL_CUMEM_ENABLE=1
export NCCL_MAX_NCHANNELS=16
