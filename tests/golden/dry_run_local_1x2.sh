mkdir -p '/w/run dir'
cd '/w/run dir' && env ENVMATRIX_BACKEND=gloo ENVMATRIX_NNODES=1 ENVMATRIX_NODE=0 'ENVMATRIX_PROBE={"collectives": ["allreduce"], "timeout_s": 60}' 'ENVMATRIX_RESULT_DIR=/w/run dir' ENVMATRIX_RUN_KEY=0123456789abcdef 'ENVMATRIX_WEIRD=a b "dq" '"'"'sq'"'"' $HOME; ls && echo x
second line' GLOO_SOCKET_IFNAME=lo GROUP_RANK=0 'LD_LIBRARY_PATH=/opt/lib dir' LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 NCCL_ALGO=Tree NCCL_IB_HCA=mlx5_0,mlx5_1 NCCL_SOCKET_IFNAME=lo RANK=0 WORLD_SIZE=2 /opt/py/bin/python -m envmatrix.rank.main &
cd '/w/run dir' && env ENVMATRIX_BACKEND=gloo ENVMATRIX_NNODES=1 ENVMATRIX_NODE=0 'ENVMATRIX_PROBE={"collectives": ["allreduce"], "timeout_s": 60}' 'ENVMATRIX_RESULT_DIR=/w/run dir' ENVMATRIX_RUN_KEY=0123456789abcdef 'ENVMATRIX_WEIRD=a b "dq" '"'"'sq'"'"' $HOME; ls && echo x
second line' GLOO_SOCKET_IFNAME=lo GROUP_RANK=0 'LD_LIBRARY_PATH=/opt/lib dir' LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 NCCL_ALGO=Tree NCCL_IB_HCA=mlx5_0,mlx5_1 NCCL_SOCKET_IFNAME=lo RANK=1 WORLD_SIZE=2 /opt/py/bin/python -m envmatrix.rank.main &
wait
