#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH --mem=lots
#ERROR 3: #SBATCH --mem=lots: expected a size
true
