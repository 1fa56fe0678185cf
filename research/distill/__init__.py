"""Distilling BinPicking's student on the teacher's own driving (research/distill/README.md)."""
