"""anonymask.models.skeleton."""
