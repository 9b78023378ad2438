"""The op tables. Importing this package registers every sdc op in `sdc.dialect.opdef.OPS`."""

from sdc.dialect.ops import (collectives, core, custom, elementwise, indexing, linalg, nn, random,  # noqa: F401
                             reduce, shape_ops, sharding)
from sdc.dialect import derivatives as _derivatives  # noqa: E402  (attaches each op's derivative rule)

_derivatives.attach()
