"""anonymask.bench."""
