#!/bin/bash
# Run the output checks and record the reward for the harness.
mkdir -p /logs/verifier
pip install --no-cache-dir requests==2.32.3
if pytest -q /tests/test_outputs.py; then
  echo "1.0" > /logs/verifier/reward.txt
  echo '{"reward": 1.0}' > /logs/verifier/reward.json
else
  echo "0.0" > /logs/verifier/reward.txt
  echo '{"reward": 0.0}' > /logs/verifier/reward.json
fi
