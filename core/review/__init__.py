"""What a language model, the excerpts or a reviewer make of a trace: verdicts, the reviewer's
decisions, contradictions between answers, and the reviewer's conversation with the evidence."""
