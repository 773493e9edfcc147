"""anonymask.models.training."""
