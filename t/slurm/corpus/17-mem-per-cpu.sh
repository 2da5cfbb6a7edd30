#!/bin/bash
#SBATCH --cpus-per-task=2
#SBATCH --mem-per-cpu=1G
#EXPECT resources/0/with/0/count=2
#EXPECT resources/0/with/1/type="memory"
#EXPECT resources/0/with/1/count=2048
true
