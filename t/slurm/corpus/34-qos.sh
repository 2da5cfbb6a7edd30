#!/bin/bash
# A QOS names one of Banyan's queues.
#SBATCH --qos=debug
#EXPECT attributes/system/queue="debug"
true
