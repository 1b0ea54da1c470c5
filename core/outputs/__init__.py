"""What the workbench hands out: the evidence pack, the drafted next round, strategies side by
side, rank metrics against judgments, files written."""
