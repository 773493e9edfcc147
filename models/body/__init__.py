"""anonymask.models.body."""
