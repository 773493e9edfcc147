"""anonymask.config."""
