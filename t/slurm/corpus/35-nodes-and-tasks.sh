#!/bin/bash
# Tasks over nodes, and cores for each.
#SBATCH --nodes=2
#SBATCH --ntasks=4
#SBATCH --cpus-per-task=1
#SBATCH -o nt-%j.out
#EXPECT resources/0/count=2
#EXPECT resources/0/with/0/count=2
#CHECK grep -qx "4 tasks on 2 nodes" nt-$ID.out
echo "$SLURM_NTASKS tasks on $SLURM_JOB_NUM_NODES nodes"
