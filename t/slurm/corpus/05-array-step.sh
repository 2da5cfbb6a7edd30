#!/bin/bash
# Every third index.
#SBATCH --array=0-6:3
#SBATCH --output=step-%a.out
#EXPECT attributes/system/array="0-6:3"
#CHECK test -f step-0.out && test -f step-3.out && test -f step-6.out && test ! -f step-1.out
echo $SLURM_ARRAY_TASK_ID
