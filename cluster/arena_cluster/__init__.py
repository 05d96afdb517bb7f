"""The arena's OpenEnv training cluster: the node's agent (`agent`) and the GRPO trainer (`trainer`)."""
