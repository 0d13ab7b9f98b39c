# Issue 38 GPU case 2: a hidden two-failure env among 10 harmless variables, on 2x1 emulated hosts sharing one GPU.
# NCCL_NET=IB: no IB device on the box, NCCL's init fails first and masks the second culprit;
# NCCL_ALGO=PAT: no PAT algorithm for AllReduce, fails once the first is repaired.
export NCCL_BUFFSIZE=4194304
export NCCL_NET=IB
export NCCL_CROSS_NIC=1
export NCCL_MIN_NCHANNELS=2
export NCCL_NET_GDR_LEVEL=PHB
export NCCL_IB_TIMEOUT=20
export NCCL_ALGO=PAT
export NCCL_SOCKET_NTHREADS=2
export NCCL_NSOCKS_PERTHREAD=2
export NCCL_PROTO=Simple
export NCCL_IGNORE_CPU_AFFINITY=1
export NCCL_CHECKS_DISABLE=1
