"""anonymask.models.hpe."""
