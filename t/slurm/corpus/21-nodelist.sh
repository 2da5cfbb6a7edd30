#!/bin/bash
#SBATCH --nodelist=node0
#SBATCH -o nodelist-%j.out
#CHECK grep -qx node0 nodelist-$ID.out
echo $SLURMD_NODENAME
