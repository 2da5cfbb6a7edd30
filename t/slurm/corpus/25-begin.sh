#!/bin/bash
# Not before a second from now.
#SBATCH --begin=now+1
#EXPECT attributes/system/dependencies/0/scheme="begin-time"
true
