#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH -J fine
#SBATCH --time=1:xx
#ERROR 4: #SBATCH --time=1:xx: '1:xx': expected MM
true
