#!/bin/bash
#SBATCH --comment="a parameter study"
#EXPECT attributes/user/comment="a parameter study"
true
