"""anonymask.models.inpaint."""
