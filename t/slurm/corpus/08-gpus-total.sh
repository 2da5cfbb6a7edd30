#!/bin/bash
# Two GPUs in all over two tasks.
#SBATCH -n 2
#SBATCH -G 2
#EXPECT resources/0/with/1/count=1
true
