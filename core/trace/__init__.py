"""retrieval -> trace: the context entries, their XML, the prompt, and views of a trace
for people."""
