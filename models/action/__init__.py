"""anonymask.models.action."""
