"""Retrieval: query analysis, candidate features, scoring, ranking, packing and receipts."""
