#!/bin/bash
#SBATCH --requeue
#EXPECT attributes/system/requeue=true
true
