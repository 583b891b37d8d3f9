"""``compgen export``: one exporter per model kind (``generator.py`` for recombination
generators, ``predictor.py`` for the conditional predictor, ``inflection.py`` for the
inflection model); the folder format shared by all of them, its checksums and manifest
checks in ``artifact.py``. Nothing is imported here, so that reading an export folder
(``artifact``) does not load torch."""
