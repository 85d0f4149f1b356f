"""How good probabilities are: metrics, reliability bins, the smooth ECE, the bootstrap and
the report that gathers them. Never imports :mod:`app.calibration.methods`."""
