"""Exact match and F1, result tables, plots, direct inference, and what a preset,
checkpoint or export holds."""
