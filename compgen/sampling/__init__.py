"""Sampling synthetic pairs from a generator: prototype-tuple selection, filters, the
collection loop, the journal of a long job, the ``--backend`` choice over
``compgen.runtimes`` and Ray actors over any of them (``ray``)."""
