#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH hostname
#ERROR 3: #SBATCH hostname: not an option
true
