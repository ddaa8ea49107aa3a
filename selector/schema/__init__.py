"""Pydantic models of every data file and user input (no I/O, no solver logic)."""
