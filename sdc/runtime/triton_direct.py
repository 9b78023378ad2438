"""The old name of sdc/runtime/launch/triton_direct.py, kept while modules and branches still import it: it
is that module (the same object, so what a test patches here it patches there)."""

import sys

from sdc.runtime.launch import triton_direct as _module

sys.modules[__name__] = _module
