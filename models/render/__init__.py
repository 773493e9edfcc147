"""anonymask.models.render."""
