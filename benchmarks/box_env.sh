# Sourced at the start of every command sent to the lent GPU box.
# NVLink multicast stays off in every process (absolute rule on the shared hosts).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
# hydra-core/omegaconf/covertable are not on the box: carried as wheels in .whl (see README of the device tool).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null
export PYTHONPATH=/tmp/site:$PWD
# The bench's compiled launch window (setup.py's optional extension), built for the box's python inside the
# checkout; without it `envmatrix bench --timing host` runs its Python loop (rows say loop: python).
python3 setup.py -q build_ext --inplace >/tmp/build_ext.log 2>&1 \
  || echo "box_env: compiled launch window not built (/tmp/build_ext.log): host rows will say loop: python" >&2
