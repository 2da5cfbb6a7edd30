#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH -N 2-4
#ERROR 3: #SBATCH -N 2-4: a range of node counts
true
