#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH --switches=1
#ERROR 3: #SBATCH --switches=1: not supported
true
