"""Analyses that use empirical_batch as a library (not part of the installed package)."""
