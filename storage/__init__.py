"""anonymask.storage."""
