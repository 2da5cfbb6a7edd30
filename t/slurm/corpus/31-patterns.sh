#!/bin/bash
# %x, %u and %% in a file name.
#SBATCH -J pat
#SBATCH -o out-%x-%u-%%.txt
#EXPECT attributes/system/shell/options/output/stdout/path="out-{{name}}-{{user}}-%.txt"
#CHECK grep -qx pat "out-pat-$(id -un)-%.txt"
echo $SLURM_JOB_NAME
