"""anonymask.models.segment."""
