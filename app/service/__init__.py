"""The use cases: each joins :mod:`app.calibration`, :mod:`app.store` and :mod:`app.figures`,
and none knows HTTP. One object per family of use cases."""
