#!/bin/bash
# A GPU for each of two tasks.
#SBATCH --ntasks=2
#SBATCH --gpus-per-task=1
#SBATCH -o gpt-%j.out
#EXPECT resources/0/count=2
#EXPECT resources/0/with/1/count=1
#CHECK test "$(grep -c '^task [01] of 2: 1 GPU$' gpt-$ID.out)" = 2
srun sh -c 'echo "task $SLURM_PROCID of $SLURM_NTASKS: $SLURM_GPUS_PER_TASK GPU"'
