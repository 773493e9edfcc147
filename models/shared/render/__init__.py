"""anonymask.models.shared.render."""
