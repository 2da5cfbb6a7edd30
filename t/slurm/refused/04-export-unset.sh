#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH --export=NOT_SET_ANYWHERE
#ERROR 3: #SBATCH --export=NOT_SET_ANYWHERE: NOT_SET_ANYWHERE is not set
true
