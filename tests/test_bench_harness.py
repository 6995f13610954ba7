"""The harness benchmark and its estimate run (smoke, not timed), and the estimate's
pricing is the arithmetic its notes state."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_harness
import estimate_harness

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_pricing_of_group_steps():
    eager = estimate_harness.Pricing(t_op=2.0, t_graph=None, peak=1.0)
    assert eager.group((3, 5, 7), steps=10, evals=2, groups=4) == 10 * 8 * 2.0 + 2 * 7 * 2.0
    graphed = estimate_harness.Pricing(t_op=2.0, t_graph=0.5, peak=1.0)
    warm = 4 * (estimate_harness.GRAPH_WARMUP + 2) * 5 * 2.0
    assert graphed.group((3, 5, 7), 10, 2, 4) == 10 * (3 * 2.0 + 5 * 0.5) + 2 * 7 * 2.0 + warm


def test_bench_harness_tiny_runs_with_its_estimate(capsys):
    assert bench_harness.main(["--config", "tiny", "--scale", "0.05", "--tasks",
                               "teacher_student", "--modes", "auto", "plain",
                               "--estimate", "--op-us", "20", "--peak-tflops", "10"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("teacher_student")]
    assert len(rows) == 2  # the timed table and the estimate
    est = rows[1]
    parts = [float(v) for v in est[1:5]]
    assert all(v >= 0 for v in parts) and float(est[5]) == pytest.approx(sum(parts), abs=0.2)
    assert "20.0 us per eager op, no graphs" in out
    assert "control s" in out and len(rows[0]) == 11  # auto, plain and control (auto again)


def test_traffic_counts_the_bytes_of_known_ops_and_leaves_out_views():
    torch = pytest.importorskip("torch")
    a, w = torch.randn(8, 16), torch.randn(16, 4, dtype=torch.float64)
    mm = bench_harness.count_traffic(lambda: a @ w.float())  # _to_copy, then mm
    assert mm.ops == 2 and mm.views == 0
    assert mm.bytes == (16 * 4 * 8 + 16 * 4 * 4) + (8 * 16 + 16 * 4 + 8 * 4) * 4
    add = bench_harness.count_traffic(lambda: a + a)
    assert (add.ops, add.bytes) == (1, 3 * 8 * 16 * 4)
    inplace = bench_harness.count_traffic(lambda: a.add_(1.0))  # self read and written
    assert (inplace.ops, inplace.bytes) == (1, 2 * 8 * 16 * 4)
    views = bench_harness.count_traffic(
        lambda: a.t().unsqueeze(0).squeeze(0).transpose(0, 1)[2:].view(-1).detach())
    assert views.ops == 0 and views.bytes == 0 and views.views == 7
    bias = torch.randn(16)
    expanded = bench_harness.count_traffic(lambda: a + bias.expand(8, 16))
    assert expanded.views == 1 and expanded.bytes == (8 * 16 * 2 + 16) * 4
    assert bench_harness.count_ops(lambda: a.t().contiguous()) == 1  # the copy, not the view


def test_traffic_sees_the_device_ops_under_vmap():
    torch = pytest.importorskip("torch")
    x = torch.randn(5, 3, 4)
    t = bench_harness.count_traffic(lambda: torch.vmap(lambda v: v.exp())(x))
    assert t.ops == 1 and t.bytes == 2 * 5 * 3 * 4 * 4


def test_pricing_takes_the_largest_of_launches_traffic_and_flops():
    price = estimate_harness.Pricing(t_op=1.0, t_graph=None, peak=10.0, bandwidth=100.0)
    assert price.bound(2.0, 100.0, 10.0) == 2.0
    assert price.bound(2.0, 500.0, 10.0) == 5.0
    assert price.bound(2.0, 100.0, 70.0) == 7.0
    cost = estimate_harness.Cost()
    cost.add(price, 2.0, 10.0, 500.0)
    cost.add(price, 3.0, 0.0, 0.0)
    assert (cost.summed, cost.bound, cost.bytes, cost.flops) == (2.0 + 1.0 + 3.0, 8.0, 500.0,
                                                                   10.0)
    with pytest.raises(ValueError, match="bandwidth"):
        estimate_harness.Pricing(t_op=1.0, t_graph=None, peak=1.0, bandwidth=0.0)


def test_bilinear_through_four_points():
    def f(n, k):
        return 1 + 2 * n + 5 * k + 3 * n * k

    q = estimate_harness.bilinear_through({p: f(*p) for p in ((16, 16), (32, 32), (64, 64),
                                                              (64, 16))})
    assert q(100) == pytest.approx(f(100, 100))
    assert q(100, 10) == pytest.approx(f(100, 10))
    assert q(100, 1000) == q(100)  # no more probes than examples


def test_probed_measurement_traffic_follows_the_fitted_form():
    """The bytes a measurement moves, counted at other sizes and probe counts, against
    the form fitted on the four counts the estimate takes."""
    torch = pytest.importorskip("torch")
    from empirical_batch.harness.tasks import make_task
    from empirical_batch.validation.experiments.noise import measure_scales

    task = make_task("teacher_student", hidden=16).to("cpu", torch.float32)
    model = task.init_model(0)

    def counted(n, k=None):
        return bench_harness.count_traffic(
            lambda: measure_scales(task, model, n, hvp_probes=k)).bytes

    q = estimate_harness.bilinear_through({(n, k): counted(n, k) for n, k in
                                           ((16, 16), (32, 32), (64, 64), (64, 16))})
    for n, k in ((96, 24), (128, 16), (200, 50), (128, 128)):
        assert counted(n, k) == pytest.approx(q(n, k), rel=0.02)
    assert counted(128, 16) < 0.25 * counted(128)


def test_estimate_refuses_a_bandwidth_of_zero(capsys):
    with pytest.raises(SystemExit):
        estimate_harness.main(["--config", "tiny", "--bandwidth-tbs", "0"])
    assert "--bandwidth-tbs" in capsys.readouterr().err


def test_traffic_names_the_bytes_of_attention_scores():
    torch = pytest.importorskip("torch")
    q = torch.randn(2, 3, 5, 4)
    t = bench_harness.count_traffic(lambda: (q @ q.transpose(-1, -2)).softmax(-1), 5)
    assert bench_harness.count_traffic(lambda: q + 1).scores == 0
    assert bench_harness.count_traffic(lambda: q @ q.transpose(-1, -2), 4).scores == 0
    scores = 2 * 3 * 5 * 5 * 4
    assert t.scores == 3 * scores  # written by the matmul, read and written by softmax
    assert t.bytes == t.scores + 2 * q.numel() * 4
    assert (t * 2).scores == 2 * t.scores and (t - t).bytes == 0
