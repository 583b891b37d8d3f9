"""compgen: compositional data augmentation (R&R, GECA, CSL, STEM-CORRUPT, KenLM).

The Python API is in :mod:`compgen.api` and re-exported here; importing compgen imports
no torch and changes no environment variable (torch comes with the first call that
needs it)."""

__version__ = "0.1.0"

# no name of a subpackage or submodule (compgen.export, compgen.evaluation.evaluate): importing one
# binds it on the package and would hide the function of the same name
_API = ("load", "geca", "csl", "stem_corrupt", "train_predictor", "train_generator",
        "export_model", "sample", "evaluate_model", "kenlm_train", "perplexity")
__all__ = ["__version__", "csl", "evaluate_model", "export_model", "geca", "kenlm_train",
           "load", "perplexity", "sample", "stem_corrupt", "train_generator", "train_predictor"]


def __dir__() -> list[str]:
    # the API's names are bound on first use; dir() and completion list them before that
    return sorted(set(globals()) | set(_API))


def __getattr__(name: str):
    # the API module is imported on first use, so `import compgen` stays light
    if name in _API:
        # start-up: `import compgen` loads the API module on first use (PEP 562)
        from compgen import api

        return getattr(api, name)
    raise AttributeError(f"module 'compgen' has no attribute {name!r}")
