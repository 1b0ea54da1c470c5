"""Retrieval: the interface to storage (source), the stages strategies are built from, the
follow-up links, and one strategy run turned into a trace (run)."""
