#!/bin/bash
# Two nodes, two tasks on each: srun starts one per task.
#SBATCH -N 2
#SBATCH --ntasks-per-node=2
#SBATCH -o tpn-%j.out
#EXPECT resources/0/type="node"
#EXPECT resources/0/count=2
#EXPECT resources/0/with/0/count=2
#CHECK test "$(grep -c . tpn-$ID.out)" = 4 && test "$(sort -u tpn-$ID.out | wc -l)" = 2
srun sh -c 'echo $SLURMD_NODENAME'
