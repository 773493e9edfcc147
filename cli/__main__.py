"""``python -m anonymask.cli``: the `anonymask` command."""

import sys

from anonymask.cli.main import main

sys.exit(main())
