"""anonymask.models.refine."""
