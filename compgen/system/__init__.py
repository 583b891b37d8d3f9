"""What the machine offers and how compgen uses it: the verified cache, memory limits,
numeric precision, a Ray cluster, the environment report."""
