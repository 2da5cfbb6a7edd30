#!/bin/bash
#SBATCH -t 1-00:00:00
#EXPECT attributes/system/duration=86400
true
