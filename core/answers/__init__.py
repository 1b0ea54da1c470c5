"""What a language model (or the excerpts themselves) make of a trace: verdicts and the
reviewer's conversation with the evidence."""
