#!/bin/bash
#SBATCH --time=10:30
#EXPECT attributes/system/duration=630
true
