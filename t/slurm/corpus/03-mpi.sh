#!/bin/bash
# An MPI program started by srun, its path the script's argument.
#SBATCH --ntasks=4
#SBATCH --output=mpi-%j.out
#EXPECT resources/0/count=4
#CHECK test "$(grep -c " of 4 on " mpi-$ID.out)" = 4
srun "$1"
