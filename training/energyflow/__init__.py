"""EnergyFlow training toolkit: model, training, export, calibration, bundles."""
__version__ = "0.1.0"
