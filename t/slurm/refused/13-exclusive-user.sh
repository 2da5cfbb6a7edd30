#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH --exclusive=user
#ERROR 3: #SBATCH --exclusive=user: --exclusive=user is not supported
true
