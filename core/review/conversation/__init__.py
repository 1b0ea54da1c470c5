"""Conversations with a vendor's evidence: history, continuation, anchoring, the ask pipeline."""
