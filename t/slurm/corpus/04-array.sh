#!/bin/bash
# A job array, two at a time, a file per element.
#SBATCH --array=1-4%2
#SBATCH -o array-%A_%a.out
#EXPECT attributes/system/array="1-4%2"
#CHECK for i in 1 2 3 4; do grep -qx "task $i of 4" array-${ID}_$i.out || exit 1; done
echo "task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT"
