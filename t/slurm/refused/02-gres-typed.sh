#!/bin/bash
# Refused: one line naming the script, the line and the option.
#SBATCH --gres=gpu:a100:2
#ERROR 3: #SBATCH --gres=gpu:a100:2: .*typed GPUs
true
