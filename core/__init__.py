"""anonymask.core."""
