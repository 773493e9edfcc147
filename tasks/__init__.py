"""anonymask.tasks."""
