#!/bin/bash
# Only a node with the bigmem feature.
#SBATCH --constraint=bigmem
#SBATCH -o constraint-%j.out
#EXPECT attributes/system/constraints={"properties": ["bigmem"]}
#CHECK grep -qx "$BIGMEM_NODE" constraint-$ID.out
echo $SLURMD_NODENAME
