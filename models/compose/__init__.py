"""anonymask.models.compose."""
