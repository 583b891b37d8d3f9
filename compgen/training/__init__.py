"""Training loops of the generator, the predictor and the inflection model, and the
checkpoint format they write."""
