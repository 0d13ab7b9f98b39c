# Sourced at the start of every command sent to the lent GPU box.
# NVLink multicast stays off in every process (absolute rule on the shared hosts).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
export PYTHONPATH=/tmp/site:$PWD
# Scripts started side by side from one shell that sourced this file already (BOX_ENV_READY=1) skip the install and
# the build: two pip installs into one --target at once corrupt it.
if [ "${BOX_ENV_READY:-0}" != 1 ]; then
# hydra-core/omegaconf/covertable are not on the box: carried as wheels in .whl (see README of the device tool).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null
# The bench's compiled launch window (setup.py's optional extension), built for the box's python inside the
# checkout; without it `envmatrix bench --timing host` runs its Python loop (rows say loop: python).
python3 setup.py -q build_ext --inplace >/tmp/build_ext.log 2>&1 \
  || echo "box_env: compiled launch window not built (/tmp/build_ext.log): host rows will say loop: python" >&2
fi
export BOX_ENV_READY=1
