"""Plots (matplotlib), one module per topic; import the topic module you need."""
