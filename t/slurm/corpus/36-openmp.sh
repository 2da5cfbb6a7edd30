#!/bin/bash
# Threads from the cores each task has.
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=2
#SBATCH -o omp-%j.out
#EXPECT resources/0/with/0/count=2
#CHECK grep -qx "threads 2" omp-$ID.out
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
echo "threads $OMP_NUM_THREADS"
