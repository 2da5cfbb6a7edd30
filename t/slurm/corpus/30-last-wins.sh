#!/bin/bash
#SBATCH -J first
#SBATCH -J second
#EXPECT attributes/system/job/name="second"
true
