"""sdc's mutation fuzzer: every input sdc accepts from a user, mutated, must end in a clean
SdcError (or a clean CLI exit code), never a crash, a hang or an allocation over the limit.

    python -m test.fuzz --cases 2000 --seed 1 --time-limit 10 --max-alloc 1G

Families (test/fuzz/families.py): `onnx-bytes` (protobuf byte flips of small ONNX models),
`onnx-struct` (structured edits: attributes, dims, dtypes, inputs, op types, opsets, external
data), `ir-text` (IR text mutations into sdc-opt, in process), `artifact` (tampered manifest,
plan and weights, hashes fixed up, then load, run and `sdc inspect`), `run-inputs` (odd run-time
inputs). Cases are numbered; case i of seed s is the same input on every machine, so a crash is
reproduced with `python -m test.fuzz --replay FAMILY:SEED:INDEX`. Each case runs in a worker
process (test/fuzz/worker.py) under a time limit and an address-space limit; the runner
(test/fuzz/run.py) restarts a worker that hangs or dies and writes a reproducer for every crash.
"""
