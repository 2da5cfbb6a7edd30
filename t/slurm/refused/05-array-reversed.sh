#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH --array=9-1
#ERROR 3: #SBATCH --array=9-1: .*reversed
true
