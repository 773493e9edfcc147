"""anonymask.models.shared."""
