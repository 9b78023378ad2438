"""`python -m sdc`: the `sdc` command line (compile, run, inspect), for when the script is not on PATH."""

from __future__ import annotations

import sys

from sdc.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
