"""anonymask.flows."""
