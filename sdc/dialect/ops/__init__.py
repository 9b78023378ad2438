"""The op tables. Importing this package registers every sdc op in `sdc.dialect.opdef.OPS`."""

from sdc.dialect.ops import (collectives, core, elementwise, indexing, linalg, nn, reduce,  # noqa: F401
                             shape_ops, sharding)
