"""GPU smoke tests: the skip-without-a-GPU hook lives in tests/conftest.py."""
