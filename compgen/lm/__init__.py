"""KenLM n-gram language models: estimation with lmplz (``kenlm_tools``), scoring,
interpolation, perplexity and the paired t-test (``perplexity``), and the GECA
experiment of the paper's Table 4 (``experiment``)."""
