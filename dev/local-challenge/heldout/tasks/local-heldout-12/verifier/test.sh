#!/bin/sh
# Simulated: the local demo never runs this verifier.
mkdir -p /logs/verifier
echo 0.0 > /logs/verifier/reward.txt
