# Issue 11 GPU case 2: an interacting pair among 10 variables on one 2-GPU node.
# P2P and SHM both disabled -> intra-node traffic goes over NET/Socket, which the site policy
# probe.forbid_transport=[NET] forbids; either one alone keeps it off the network.
export NCCL_P2P_DISABLE=1
export NCCL_CROSS_NIC=1
export NCCL_BUFFSIZE=4194304
export NCCL_ALGO=Ring
export NCCL_SHM_DISABLE=1
export NCCL_NET_GDR_LEVEL=PHB
export NCCL_MIN_NCHANNELS=2
export NCCL_PROTO=Simple
export NCCL_SOCKET_NTHREADS=2
export NCCL_IGNORE_CPU_AFFINITY=1
