"""The decoding core: the ``Stepper`` protocol every backend implements (``stepper``), the
search strategies (``search``: greedy and beam; ``fairseq_beam``: the inflection model's)
and, as a separate axis, the samplers a greedy search picks tokens with (``samplers``:
argmax, temperature, mixed); the decoding contract written into every generator export's
manifest (``contract``), the prototype encodings kept across batches (``prototypes``) and
the counter-based random stream (``random_stream``); the options of a sampling job
(``options``: ``SampleOptions``, also a generator preset's ``[sample]``, which training
reads).

Nothing is imported here: callers name the module, so that the command line's start-up
(which reads ``random_stream``) stays light."""
