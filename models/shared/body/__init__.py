"""anonymask.models.shared.body."""
