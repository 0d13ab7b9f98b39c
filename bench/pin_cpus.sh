#!/usr/bin/env bash
# Runs "$@" bound to the CPUs in $PIN_CPUS (a taskset list), for placement experiments under mpirun.
echo "rank ${OMPI_COMM_WORLD_RANK:-?}: CPUs ${PIN_CPUS:?}" >&2
exec taskset -c "$PIN_CPUS" "$@"
