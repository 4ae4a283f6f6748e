"""One module per op family: formula docstring, float64 reference, validation, public functions."""
