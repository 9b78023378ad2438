"""sdc's tests: test/py (pytest), test/lit (sdc-opt), test/fuzz (the mutation fuzzer, `python -m test.fuzz`).

A package so that `python -m test.fuzz` finds this tree's fuzzer rather than Python's own `test`
package."""
