# Sourced by the 2xH200 diagnoses: nccl-tests built with MPI=1 in $NTM (one process per GPU: the fair reference)
# and torch's libnccl located in $nccl_home. nccl-tests' source comes carried in .nt (ignored, never committed).
SRC=${SRC:-$PWD/.nt/nccl-tests}
NTM=$SRC/build_mpi
nccl_home=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])") || exit 2
nt_mpi_build() {  # nt_mpi_build LOG NAME...: builds NAME_perf for each NAME into $NTM unless all are there
  local log=$1 have=1; shift
  for b in "$@"; do [ -x "$NTM/${b}_perf" ] || have=0; done
  [ $have = 1 ] || ( cd "$SRC/src" && timeout 300 make -j8 MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi \
    BUILDDIR="$NTM" NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" CUDA_HOME=/usr/local/cuda \
    BIN_FILES_LIST="$*" build ) >>"$log" 2>&1
}
