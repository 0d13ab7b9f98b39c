#!/bin/bash
# envmatrix sweep inside a PBS allocation (rendered by `envmatrix submit`; values are shell-quoted).
# -V: the job gets the submitting shell's environment (modules, PATH, CUDA), as sbatch gives it by default.
#PBS -N envmx
#PBS -l select=2:ncpus=4:mpiprocs=4:ngpus=4
#PBS -l walltime=00:30:00
#PBS -o envmx.out
#PBS -j oe
#PBS -V
#PBS -A proj1
#PBS -q debug
#PBS --exclusive
set -euo pipefail
cd '/home/u/runs dir'
# The launcher (mpiexec/mpirun) starts the ranks on the nodes in $PBS_NODEFILE; grids are checked against it.
exec /opt/py/bin/python -m envmatrix sweep 'conf=my conf.yaml' 'grids=[1x4,2x2]' launcher=srun
