#!/bin/bash
# A whole node.
#SBATCH --nodes=1
#SBATCH --exclusive
#EXPECT resources/0/exclusive=true
true
