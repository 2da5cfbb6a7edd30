#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH -J fine
#SBATCH --time=0
#ERROR 4: #SBATCH --time=0: '0': a time limit of 0
true
