# envmatrix search: study search_h200_2x2, trial 33 (busbw:allreduce+allgather@256M=19.88) on 2x2
export NCCL_SOCKET_NTHREADS=4
export NCCL_NSOCKS_PERTHREAD=4
