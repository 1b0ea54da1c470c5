"""Retrieval: the interface to storage (source), the stages strategies are built from,
precedence (tiers), the follow-up links, and one strategy run turned into a trace (run)."""
