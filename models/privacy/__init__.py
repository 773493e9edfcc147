"""anonymask.models.privacy."""
