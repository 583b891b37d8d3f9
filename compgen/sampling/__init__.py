"""Sampling synthetic pairs from a generator: typed options, prototype-tuple selection,
filters, the collection loop, and the backends that decode (``backends/``)."""
