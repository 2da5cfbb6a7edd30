#!/bin/bash
# Refused: one line naming the script, the line and the option.
#FLUX: --bank=x
#ERROR 3: #FLUX: --bank=x: not supported
true
