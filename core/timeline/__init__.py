"""Documents in time: what a document states of itself (its kind, title, issuer and dates),
read from its text at ingest, and which documents are versions of one another, which is
current and which went stale. Nothing here reads the store; the modules import only the
ground (`core.models`)."""
