"""anonymask.models.pose."""
