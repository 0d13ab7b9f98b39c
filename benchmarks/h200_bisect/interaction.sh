# A real NCCL interaction on one 4-GPU node: with both P2P and SHM disabled, intra-node
# traffic falls back to NET/Socket; either one alone still keeps it off the network.
# The site policy "never NET inside a node" (probe.forbid_transport=[NET]) turns that into a failure.
export NCCL_P2P_DISABLE=1
export NCCL_CROSS_NIC=1
export NCCL_SHM_DISABLE=1
export NCCL_BUFFSIZE=4194304
export NCCL_ALGO=Ring
export NCCL_NET_GDR_LEVEL=PHB
