"""Embedders: the protocol, a registry of providers, the offline default and a hashing embedder."""
