# Sourced at the start of every command sent to the lent GPU box.
# NVLink multicast stays off in every process (absolute rule on the shared hosts).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
# hydra-core/omegaconf/covertable are not on the box: carried as wheels in .whl (see README of the device tool).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null
export PYTHONPATH=/tmp/site:$PWD
