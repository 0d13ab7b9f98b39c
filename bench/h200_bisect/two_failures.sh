# Issue 11: two independent failures on the 2xH200 box, the first masking the second.
# NCCL_NET=IB: no InfiniBand device on the box -> fails at communicator init.
# NCCL_ALGO=PAT: PAT is not supported for the probe's collectives on one node -> fails at the first collective
# (only seen once NCCL_NET=IB is gone). The other 9 are real NCCL variables, harmless here.
export NCCL_DEBUG=WARN
export NCCL_NET=IB
export NCCL_BUFFSIZE=4194304
export NCCL_SOCKET_NTHREADS=2
export NCCL_NSOCKS_PERTHREAD=2
export NCCL_ALGO=PAT
export NCCL_MIN_NCHANNELS=2
export NCCL_CHECK_POINTERS=0
export NCCL_IGNORE_CPU_AFFINITY=1
export NCCL_LAUNCH_MODE=PARALLEL
export NCCL_CUMEM_ENABLE=1
