"""``compgen export``: building and validating export folders. One ``export_checkpoint``
(``kinds.py``) reads a checkpoint's kind and runs that kind's registered spec
(``generator.py`` for recombination generators, ``predictor.py`` for the conditional
predictor, ``inflection.py`` for the inflection model); the steps and the parity check
every kind shares are in ``spec.py``, and the check runs each backend through
``compgen.runtimes``, where the folder format, its checksums and manifest checks are
(``runtimes/artifact.py``). Nothing is imported here."""
