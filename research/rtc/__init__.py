"""Real-time chunking (issue 51): sim eval summaries with --chunking and --delay as one table."""
