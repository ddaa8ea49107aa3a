"""What the user gives: a deployment file, a ``vllm serve`` line, a flat config."""
