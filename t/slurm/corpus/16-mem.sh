#!/bin/bash
# Memory in megabytes, Slurm's unit for a bare number.
#SBATCH --mem=512
#EXPECT resources/0/type="node"
#EXPECT resources/0/with/0/with/1/type="memory"
#EXPECT resources/0/with/0/with/1/count=512
true
