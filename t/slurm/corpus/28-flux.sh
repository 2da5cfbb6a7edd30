#!/bin/bash
# Flux's directives, as flux batch reads them.
#FLUX: -N1 -n2
#FLUX: --job-name=fluxjob
#EXPECT attributes/system/job/name="fluxjob"
#EXPECT resources/0/with/0/count=2
true
