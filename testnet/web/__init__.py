"""The live web view of a testnet (``overlay testnet web``)."""
