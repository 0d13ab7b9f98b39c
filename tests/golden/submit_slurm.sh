#!/bin/bash
# envmatrix sweep inside a Slurm allocation (rendered by `envmatrix submit`; values are shell-quoted).
#SBATCH --job-name=envmx
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --time=00:30:00
#SBATCH --output=envmx.out
#SBATCH --gpus-per-node=4
#SBATCH --account=proj1
#SBATCH --partition=debug
#SBATCH --exclusive
set -euo pipefail
cd '/home/u/runs dir'
# The launcher (srun/mpirun) starts the ranks inside this allocation; grids are checked against it.
exec /opt/py/bin/python -m envmatrix sweep 'conf=my conf.yaml' 'grids=[1x4,2x2]' launcher=srun
