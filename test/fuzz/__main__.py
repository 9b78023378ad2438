"""`python -m test.fuzz`: the campaign runner (test/fuzz/run.py)."""

from __future__ import annotations

import sys

from test.fuzz.run import main

sys.exit(main())
