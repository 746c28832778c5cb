"""Bridges to other tuning libraries (evoscale.integration.optuna: EvoscaleSampler)."""
