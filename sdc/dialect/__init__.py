"""The sdc dialect: op definitions (MLIR-free, in `opdef` and `ops/`) and their MLIR binding (`dialect`)."""
