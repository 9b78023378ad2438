"""A process of the distributed tests (test_distributed.py), launched by torchrun or by the test itself.

    python distributed_worker.py run OUT.npz ART:INPUTS.npz ...   run each artifact on its inputs; rank 0
                                                                  saves the outputs (name ART/output)
    python distributed_worker.py die ART INPUTS.npz               every rank runs once; then rank 1 exits,
                                                                  and the others run again
    python distributed_worker.py hang ART INPUTS.npz              as `die`, but rank 1 stops answering
    python distributed_worker.py mismatch ART INPUTS.npz          rank 1 gets a batch one row larger
    python distributed_worker.py compile MODEL MESH OUT.sdc INPUTS.npz RESULT.npz
                                                                  sdc.compile(MODEL, mesh=MESH) on every rank
                                                                  (rank 0 writes OUT.sdc), run, save outputs

Except `compile`, uses the runtime only (no MLIR): `sdc.runtime.load` reads RANK / WORLD_SIZE /
LOCAL_RANK and joins.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np


def _inputs(path: str) -> list[np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return [data[k] for k in sorted(data.files)]


def main(argv: list[str]) -> int:
    import sdc.runtime
    from sdc.diagnostics import SdcError

    mode = argv[0]
    rank = int(os.environ["RANK"])
    if mode == "run":
        out_path, results = argv[1], {}
        for item in argv[2:]:
            art, inputs = item.split(":", 1)
            exe = sdc.runtime.load(art)
            for info, y in zip(exe.outputs, exe(*_inputs(inputs))):
                results[f"{os.path.basename(art)}/{info.name}"] = y
        if rank == 0:
            np.savez(out_path, **results)
        return 0
    if mode == "compile":
        import sdc

        model, mesh, out, inputs, result = argv[1:6]
        exe = sdc.compile(model, mesh=mesh, output=out)
        ys = exe(*_inputs(inputs))
        if rank == 0:
            np.savez(result, **{info.name: y for info, y in zip(exe.outputs, ys)})
        return 0
    art, inputs = argv[1], _inputs(argv[2])
    exe = sdc.runtime.load(art)
    if mode == "mismatch":
        if rank == 1:
            inputs = [np.concatenate([x, x[:1]]) for x in inputs]
        try:
            exe(*inputs)
        except SdcError as e:
            print(f"error: {e}", file=sys.stderr, flush=True)
            return 1
        return 0
    exe(*inputs)
    print(f"rank {rank}: first run done", file=sys.stderr, flush=True)
    if rank == 1:
        if mode == "die":
            os._exit(3)
        time.sleep(600)  # hang: alive, but never reaches the next collective
    started = time.monotonic()
    try:
        exe(*inputs)
    except SdcError as e:
        print(f"error: {e} (after {time.monotonic() - started:.1f} s)", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
