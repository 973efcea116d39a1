"""Engine operations, one module per concern; MemoryClient methods delegate here."""
