"""The calibration service: fit, store, serve and diagnose probability calibrators."""

__version__ = "0.1.0"
