"""anonymask.deploy."""
