"""anonymask.cli.main."""
