"""Packaged data access, the on-disk cache and the user's small input files."""
