"""Which products run on one thread when the caller gives torch several: the CPU executor's thread gate.

torch's CPU kernels fan out over OpenMP threads, and with `OMP_WAIT_POLICY=PASSIVE` (the setting sdc
documents for shared machines: spinning threads steal the cores from everything else) a thread that
finished its share sleeps, so every parallel region pays a wake-up: tens to hundreds of microseconds on
a loaded 2-core VM. Below the sizes here one thread is faster. The executor switches torch's count per
product (`executor._thread_gate`), and a convolution's weight is packed for the count it will run with
(`reference_kernels.packed_conv`): oneDNN's blocked weight format depends on the thread count, and a
weight packed for another count is reordered again on every call (measured: ResNet-50 at 2 threads
with its convolutions up to 64M multiply-adds on one thread took 128 ms packed for two, 63 packed for
one).

Measured on this project's 2-core Xeon VM, 2 threads, PASSIVE, each process alone (2026-12-03):
- matmul: a [16, 32] x [32, 96] product took 25-70 us against 5.5 us on one thread, a small softmax
  12-36 us against 4; a 1M multiply-add op takes about 40 us on one core;
- convolution (oneDNN, channels-last, prepacked): ShuffleNet's grouped 1x1 convolutions (3.6M
  multiply-adds) took 80 us on one thread, 210-500 on two; ResNet-50's 51-115M ones gain 1.2-1.7x from
  the second thread. Whole models, convolutions of up to 16M on one thread instead of up to 1M:
  ShuffleNet 20.0 -> 11.9 ms, SqueezeNet 10.7 -> 8.3, Inception-v1 32.5 -> 30.0, ResNet-50 41.7 ->
  43.3 (within its noise: it has one convolution under 16M);
- every other op (memory-bound: an LRN's or a pool's passes over 0.3-2.4M elements ran slower on two
  threads than on one): with operands of up to 4M elements on one thread, not on the caller's,
  Inception-v1 32.7 -> 26.8 ms, DenseNet-121 71.6 -> 57.4, Inception-v2 38.2 -> 34.2, SqueezeNet 9.7
  -> 8.1, ShuffleNet 14.5 -> 11.5; ResNet-50 43.1 -> 44.2 and ZFNet-512 27.2 -> 29.5 (they have few
  such ops between large convolutions).

How the threads wait decides how much a second thread's wake-up costs, so the convolution and other-op
limits depend on it (`threads_sleep`, read once when this module loads, as OpenMP reads it when torch
loads). Sleeping threads (`OMP_WAIT_POLICY=PASSIVE`, or `GOMP_SPINCOUNT=0`): the limits above. Threads
that spin a while before they sleep (the policy unset, as the bench runs sdc: `GOMP_SPINCOUNT=30000`)
wake within microseconds, and small ops gain from the second thread too: convolutions of up to 1M
multiply-adds and other ops of up to 64K elements on one thread. Measured in one process, sdc and
onnxruntime (its spinning off) alternating, 2 threads, medians of 15 calls (2026-12-03), PASSIVE with
16M/4M against a 30000 spin with 1M/64K: SqueezeNet 10.3 -> 6.6 ms (onnxruntime 6.0), ResNet-50 47.6
-> 40.8 (32.9), DenseNet-121 66.7 -> 47.9 (46.2), ShuffleNet 10.7 -> 9.5 (6.0), Inception-v1 32.9 ->
24.6 (27.5), Inception-v2 35.4 -> 26.1 (20.0); BERT 0.33 -> 0.31 ms (0.30). With the spin, a 4M
convolution limit cost ShuffleNet 6% and SqueezeNet 10%.
"""

from __future__ import annotations

import os
from typing import Sequence


def threads_sleep(env=os.environ) -> bool:
    """Whether torch's OpenMP threads sleep as soon as they are idle: `OMP_WAIT_POLICY=PASSIVE` or a
    `GOMP_SPINCOUNT` of 0 (libgomp's settings; a spin count without the policy spins that long)."""
    return env.get("OMP_WAIT_POLICY", "").strip().upper() == "PASSIVE" or env.get("GOMP_SPINCOUNT", "").strip() == "0"


SLEEPING = threads_sleep()
SERIAL_MACS = 1 << 20  # multiply-adds of the largest matmul on one thread
SERIAL_ELEMENTS = 1 << 16  # ... and elements of its result
SERIAL_CONV_MACS = 1 << 24 if SLEEPING else 1 << 20  # multiply-adds of the largest convolution on one thread
# ... and its weight's elements, where threads spin: a convolution of few pixels streams its weight, and
# the second core doubles the bandwidth (sdc's C kernel splits the weight's columns over the threads):
# a squeeze-excite block's 168 -> 672 channels over 2 pixels (113K weights) 15.9 us on one thread, 11.8
# on two; 120 -> 480 (58K) 9.8 and 9.1; 64 -> 256 (16K) 5.4 and 6.6 (2026-12-05)
SERIAL_CONV_WEIGHTS = 1 << 62 if SLEEPING else 1 << 16
# any other op (elementwise, pooling, normalization, copies): its largest operand
SERIAL_OP_ELEMENTS = 1 << 22 if SLEEPING else 1 << 16


def conv_macs(input_shape: Sequence[int], weight_shape: Sequence[int], strides: Sequence[int] | None) -> int:
    """A convolution's multiply-adds, its result's pixels estimated as the input's over the strides."""
    if len(input_shape) < 3 or len(weight_shape) < 2:
        return 0
    pixels = input_shape[0]
    for size, stride in zip(input_shape[2:], list(strides or []) + [1] * len(input_shape)):
        pixels *= max(1, size // max(1, int(stride)))
    per_output = 1
    for d in weight_shape:
        per_output *= d
    return pixels * per_output


def small_conv(input_shape: Sequence[int], weight_shape: Sequence[int], strides: Sequence[int] | None) -> bool:
    weights = 1
    for d in weight_shape:
        weights *= d
    return conv_macs(input_shape, weight_shape, strides) <= SERIAL_CONV_MACS and weights <= SERIAL_CONV_WEIGHTS


def small_matmul(a_shape: Sequence[int], b_shape: Sequence[int], transpose_lhs: bool, transpose_rhs: bool) -> bool:
    """Whether `a @ b` has at most `SERIAL_ELEMENTS` result elements and `SERIAL_MACS` multiply-adds."""
    if not a_shape or not b_shape:
        return True
    k = a_shape[-2] if transpose_lhs and len(a_shape) > 1 else a_shape[-1]
    n = (b_shape[-2] if transpose_rhs else b_shape[-1]) if len(b_shape) > 1 else 1
    rows = 1
    for d in a_shape:
        rows *= d
    elements = rows // max(1, k) * n
    return elements <= SERIAL_ELEMENTS and elements * k <= SERIAL_MACS
