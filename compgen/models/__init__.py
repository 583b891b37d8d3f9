"""Neural models: the R&R generator (recombine.py), attention (attention.py)."""
