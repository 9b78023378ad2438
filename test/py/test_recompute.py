"""sdc-recompute: a memory budget makes a training step recompute forward activations in the backward.

The choice is checked on plain data (`JointGraph`s): a chain, and a matmul -> gelu -> matmul graph
where the right cut is known (keep the matmul's output, recompute the gelu; a random op or a matmul
is never recomputed while something cheaper fits). The pass end to end on an MLP and a transformer
block training step: a budget run plans a lower peak than the run without one (the pass's estimate by
the memory plan's rules) and an artifact arena within the budget, and gives bit-equal losses over
several steps (recomputation repeats the same ops on the same values), as torch eager trains; the
clones sit in the backward; a budget below what recomputation reaches is one error naming the minimum,
measured on the artifacts when the estimate is wrong.
"""

from __future__ import annotations

import copy
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import sdc
import sdc.optim
from sdc.diagnostics import SdcError
from sdc.transforms.recompute import RECOMPUTED_ATTR, JointGraph, OpNode, choose, min_cut

KIB = 1024


def _chain(n: int, size: int) -> JointGraph:
    """x -> f1 -> ... -> fn (forward, each kept for the backward), then b_n ... b_1 reading them
    in reverse: the classic checkpointing case, where every activation is live at the turn."""
    ops = [OpNode((0,), (1,), True, 1)]
    for i in range(1, n):
        ops.append(OpNode((i,), (i + 1,), True, 1))
    grad = n + 1
    ops.append(OpNode((n,), (grad,), False))  # the seed's op
    for i in range(n, 0, -1):
        ops.append(OpNode((grad, i), (grad + 1,), False))
        grad += 1
    sizes = {v: size for v in range(1, grad + 1)}
    return JointGraph(ops, sizes)


def test_choose_on_a_chain():
    graph = _chain(6, 4 * KIB)
    keep_all = choose(graph, None)
    assert keep_all.recompute == frozenset() and keep_all.peak == keep_all.peak_before == 8 * 4 * KIB
    fitted = choose(graph, 5 * 4 * KIB)
    assert fitted.recompute and fitted.peak <= 5 * 4 * KIB < fitted.peak_before
    assert all(graph.ops[i].forward for i in fitted.recompute)
    with pytest.raises(SdcError, match=r"below what recomputation reaches: the lowest planned peak is .* \(\d+ bytes\)"):
        choose(graph, 4 * KIB)


def _gelu_graph(random: bool = False) -> JointGraph:
    """x, w1, w2 (entry inputs 0-2) -> h = x @ w1 (op 0, heavy) -> a = gelu(h) (op 1) -> y = a @ w2 (op 2,
    heavy) -> loss (op 3, an entry result); the backward reads h (gelu's derivative) and a (w2's
    gradient). Every activation is 4 KiB. `random`: the gelu is a dropout mask instead (cost 0: never
    recomputed)."""
    ops = [OpNode((0, 1), (3,), True, 2 * 1024 * 64, heavy=True),
           OpNode((3,), (4,), True, 0 if random else 1024),
           OpNode((4, 2), (5,), True, 2 * 1024 * 64, heavy=True),
           OpNode((5,), (6,), True, 1024),
           OpNode((5,), (7,), False),                 # the loss's cotangent w.r.t. y
           OpNode((4, 7), (8,), False),               # grad w2 = a^T g
           OpNode((7, 2), (9,), False),               # g_a = g w2^T
           OpNode((3, 9), (10,), False),              # g_h = gelu'(h) g_a
           OpNode((0, 10), (11,), False),             # grad w1 = x^T g_h
           OpNode((6, 8, 11), (), False)]             # the return
    sizes = {v: 4 * KIB for v in (3, 4, 5, 7, 9, 10)}
    return JointGraph(ops, sizes, returned=frozenset({6, 8, 11}))


def test_min_cut_keeps_the_matmul_and_recomputes_the_gelu():
    graph = _gelu_graph()
    assert min_cut(graph, 1e6) == frozenset()  # recomputation dear: keep both activations
    assert min_cut(graph, 1e-3) == frozenset({1})  # cheap: keep h, recompute a = gelu(h)
    assert min_cut(graph, 1e-9) == frozenset({1})  # the matmul stays kept while heavy ops are kept
    assert min_cut(graph, 1e-9, heavy=True) == frozenset({0, 1, 2})  # free flops: everything from x
    free = choose(graph, None)
    assert free.recompute == frozenset() and free.peak == free.peak_before
    fitted = choose(graph, free.peak - 4 * KIB)
    assert fitted.recompute == frozenset({1}) and fitted.peak <= free.peak - 4 * KIB
    masked = _gelu_graph(random=True)
    assert min_cut(masked, 1e-9) == frozenset()  # a random op is kept, whatever recomputation costs
    assert 1 not in choose(masked, free.peak - 4 * KIB).recompute


def _mlp() -> nn.Module:
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 64), nn.GELU(),
                         nn.Linear(64, 10))


def _data(steps: int = 4) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(4)
    return [(torch.randn(512, 16, generator=gen), torch.randint(0, 10, (512,), generator=gen)) for _ in range(steps)]


def _planned(step) -> tuple[int, int]:
    """The pass's estimate (peak before, peak after) recorded in the artifact's program.mlir."""
    program = (step.program.exe.path / "program.mlir").read_text()
    found = re.search(r"sdc.recompute = \{([^}]*)\}", program)
    fields = dict(re.findall(r"(\w+) = (\d+)", found.group(1)))
    return int(fields["peak_before"]), int(fields["peak"])


def test_budget_lowers_the_planned_peak_with_the_same_losses():
    model, data = _mlp(), _data()
    runs = {}
    budget = 900 * KIB
    for limit in (None, budget):
        step = sdc.compile_train(copy.deepcopy(model), data[0], loss=F.cross_entropy,
                                 optimizer=sdc.optim.AdamW(lr=1e-3), memory_budget=limit, target="cpu")
        losses = [step(x, y) for x, y in data]
        program = (step.program.exe.path / "program.mlir").read_text()
        runs[limit] = (losses, step.info()["planned_peak_bytes"], program.count(RECOMPUTED_ATTR), step.state_dict(),
                       step)
    (free_losses, free_peak, free_clones, free_params, _), (losses, peak, clones, params, step) = runs.values()
    assert free_clones == 0 and clones > 0
    before, after = _planned(step)
    assert after <= budget < before  # the estimate by the memory plan's rules
    assert peak <= budget, (peak, free_peak)  # the artifact's arena (the reported planned peak)
    assert peak < free_peak  # the real arena falls with recomputation, not only the estimate
    assert losses == free_losses  # the same ops on the same values: bit for bit
    for name in free_params:
        assert torch.equal(params[name], free_params[name]), name


class _Block(nn.Module):
    """A pre-norm transformer block (attention, GELU MLP, both residual) with a token classifier: the
    activations a budget weighs are of every kind there (norms, softmax, matmuls, elementwise)."""

    def __init__(self, d: int = 32, heads: int = 4, vocab: int = 11):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.head = nn.Linear(d, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attention = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((attention @ v).transpose(1, 2).reshape(b, t, d))
        x = x + self.out(F.gelu(self.fc(self.ln2(x))))
        return self.head(x)


def _token_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1), target.flatten())


def test_transformer_block_budget_lowers_the_planned_peak_with_the_same_losses():
    """A transformer block: a 560 KiB budget, below the pass's estimate without recomputation, plans a
    lower peak within the budget, and an artifact arena within it, with bit-equal losses and
    parameters; both runs train as torch eager does."""
    torch.manual_seed(int(torch.randint(1 << 30, ())))
    model = _Block()
    gen = torch.Generator().manual_seed(int(torch.randint(1 << 30, ())))
    data = [(torch.randn(8, 16, 32, generator=gen), torch.randint(0, 11, (8, 16), generator=gen)) for _ in range(3)]
    budget = 560 * KIB
    runs = {}
    for limit in (None, budget):
        step = sdc.compile_train(copy.deepcopy(model), data[0], loss=_token_loss, optimizer=sdc.optim.AdamW(lr=1e-3),
                                 memory_budget=limit, target="cpu")
        losses = [step(x, y) for x, y in data]
        program = (step.program.exe.path / "program.mlir").read_text()
        runs[limit] = (losses, step.info()["planned_peak_bytes"], program.count(RECOMPUTED_ATTR),
                       _planned(step) if limit else None, step.state_dict())
    (free_losses, free_peak, free_clones, _, free_params), (losses, peak, clones, planned, params) = runs.values()
    before, after = planned
    assert free_clones == 0 and clones > 0
    assert after <= budget < before
    assert peak <= budget, (peak, free_peak)
    assert peak < free_peak
    assert losses == free_losses
    for name in free_params:
        assert torch.equal(params[name], free_params[name]), name
    eager = copy.deepcopy(model)
    opt = torch.optim.AdamW(eager.parameters(), lr=1e-3)
    want = []
    for x, y in data:
        opt.zero_grad()
        loss = _token_loss(eager(x), y)
        loss.backward()
        opt.step()
        want.append(loss.item())
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(want), rtol=1e-5, atol=1e-5)


def test_clones_are_in_the_backward_and_the_minimum_is_reported():
    from sdc.compiler import run_pipeline
    from sdc.dialect.ir import entry_function
    from sdc.frontend import import_model
    from sdc.frontend.torch.training import with_loss
    from sdc.transforms.optimizer_step import pass_options

    x, y = _data(1)[0]

    def step_module():
        module, _, _ = import_model(with_loss(_mlp(), F.cross_entropy), example_args=(x, y))
        run_pipeline(module, ["sdc-autodiff", pass_options(sdc.optim.SGD(lr=0.1)), "sdc-canonicalize", "cse"])
        return module

    module = step_module()
    run_pipeline(module, [f"sdc-recompute{{memory-budget={900 * KIB}}}"])
    with module.context:
        ops = [op.operation for op in entry_function(module).regions[0].blocks[0].operations]
        loss = ops[-1].operands[0]
        loss_at = next(i for i, op in enumerate(ops) if loss in list(op.results))
        clones = [i for i, op in enumerate(ops) if RECOMPUTED_ATTR in op.attributes]
    assert clones and min(clones) > loss_at  # in the backward: after the loss is computed
    with pytest.raises(SdcError, match=r"memory budget 1000 B \(1000 bytes\) is below what recomputation reaches: "
                                       r"the lowest planned peak is .* \(\d+ bytes\)"):
        run_pipeline(step_module(), ["sdc-recompute{memory-budget=1000}"])
    # what sdc.compile_train branches on: the estimate's miss, recorded as a value on the module
    from sdc.transforms.recompute import estimate_misses_budget, report

    assert not estimate_misses_budget(module) and report(module)["arena"] <= 900 * KIB
    missed = step_module()
    with pytest.raises(SdcError):
        run_pipeline(missed, ["sdc-recompute{memory-budget=1000}"])
    assert estimate_misses_budget(missed) and report(missed)["unreachable"] > 1000


def test_errors():
    with pytest.raises(SdcError, match="memory_budget must be a positive number of bytes, found -5"):
        sdc.options.CompileOptions(memory_budget=-5)
    from sdc.compiler import run_pipeline
    from sdc.frontend import import_model

    module, _, _ = import_model(nn.Linear(4, 2), example_args=(torch.randn(3, 4),))
    with pytest.raises(SdcError, match="sdc-recompute runs after sdc-autodiff"):
        run_pipeline(module, ["sdc-recompute{memory-budget=1000}"])



def test_the_measured_search_bisects_for_the_least_recomputation_that_fits():
    """sdc.compile_train's search over the cuts when an artifact misses the budget, on plain data: the
    first cut whose measured arena fits, in few measurements, else None and the lowest measured."""
    from sdc.train import first_fitting_cut

    arenas = [900, 880, 700, 650, 640, 500, 480, 470]
    seen = []

    def measure(k: int) -> int:
        seen.append(k)
        return arenas[k]

    assert first_fitting_cut(measure, len(arenas), 650) == (3, 650) and len(seen) <= 4
    assert first_fitting_cut(arenas.__getitem__, len(arenas), 100) == (None, 470)
    assert first_fitting_cut(arenas.__getitem__, len(arenas), 10_000)[0] == 0
