# envmatrix search: study search_confirm_2x1, trial 5, confirmed: median busbw:allreduce+allgather@256M=7.959 [4.595 .. 8.597] over 6 interleaved repeats on 2x1
export NCCL_ALGO=allreduce:tree
export NCCL_SOCKET_NTHREADS=4
export NCCL_NSOCKS_PERTHREAD=4
