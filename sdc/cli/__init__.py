"""Command-line front ends: `sdc` (compile/run/inspect) and `sdc-opt` (IR in, IR out)."""
