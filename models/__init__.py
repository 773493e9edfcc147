"""anonymask.models."""
