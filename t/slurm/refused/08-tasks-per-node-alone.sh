#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH --ntasks-per-node=4
#ERROR 3: #SBATCH --ntasks-per-node=4: needs --nodes
true
