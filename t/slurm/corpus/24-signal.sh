#!/bin/bash
#SBATCH --time=5
#SBATCH --signal=USR1@30
#EXPECT attributes/system/shell/options/signal={"signum": 10, "timeleft": 30.0}
true
