#!/usr/bin/env bash
# Runs "$@" bound to the CPUs in $PIN_CPUS (a taskset list), for placement experiments under mpirun;
# PIN_RANKS="LIST0;LIST1;..." binds each MPI rank to its own list instead.
if [ -n "${PIN_RANKS:-}" ]; then
  IFS=';' read -ra lists <<<"$PIN_RANKS"
  PIN_CPUS=${lists[${OMPI_COMM_WORLD_RANK:?}]}
fi
echo "rank ${OMPI_COMM_WORLD_RANK:-?}: CPUs ${PIN_CPUS:?}" >&2
exec taskset -c "$PIN_CPUS" "$@"
