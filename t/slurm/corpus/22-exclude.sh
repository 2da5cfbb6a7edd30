#!/bin/bash
#SBATCH --exclude=node0
#SBATCH -o exclude-%j.out
#CHECK grep -qx node1 exclude-$ID.out
echo $SLURMD_NODENAME
