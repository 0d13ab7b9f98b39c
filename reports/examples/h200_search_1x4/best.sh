# envmatrix search: study search_h200_1x4, trial 3 (busbw:allreduce+allgather@256M=328) on 1x4
export NCCL_ALGO=allreduce:ring
export NCCL_PROTO=Simple
