"""Runnable examples against a local testnet: ``python -m testnet.examples.spark_job``."""
