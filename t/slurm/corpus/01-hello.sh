#!/bin/bash
# The first script of every site's guide.
#SBATCH --job-name=hello
#SBATCH --output=hello-%j.out
#SBATCH --time=00:05:00
#EXPECT attributes/system/job/name="hello"
#EXPECT attributes/system/duration=300
#EXPECT attributes/system/shell/options/output/stdout/path="hello-{{id.dec}}.out"
#CHECK grep -qx "Hello from $ID" hello-$ID.out
echo "Hello from $SLURM_JOB_ID"
