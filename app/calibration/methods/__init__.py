"""The calibration methods, one per module, and the registry built from what each declares."""
