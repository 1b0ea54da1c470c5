"""What the workbench hands out: the evidence pack, the drafted next round, strategy
quality, files written."""
