"""The op tables. Importing this package registers every sdc op in `sdc.dialect.opdef.OPS`; each op
names its derivative rule (sdc/dialect/derivatives.py) where it is defined."""

from sdc.dialect.ops import (collectives, core, custom, elementwise, indexing, linalg, nn, random,  # noqa: F401
                             reduce, shape_ops, sharding)
