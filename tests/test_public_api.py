"""The public names (docs/design.md) import from the top level, without torch."""

import subprocess
import sys

import empirical_batch

CONTRACT = [
    "QuadraticModel", "eps_opt", "dl_opt", "Tradeoff", "plan", "gns_two_batch",
    "GNSEstimator", "NoisyQuadratic", "simulate_sweep", "load_sweep", "steps_to_target",
    "fit_tradeoff", "TradeoffFit", "critical_batch_curve", "fit_power_law", "PowerLaw",
]


def test_contract_names_resolve():
    for name in CONTRACT:
        assert getattr(empirical_batch, name) is not None, name
    assert set(CONTRACT) <= set(empirical_batch.__all__)


def test_all_exports_resolve():
    for name in empirical_batch.__all__:
        getattr(empirical_batch, name)


def test_top_level_does_not_import_torch():
    code = (
        "import sys, empirical_batch as eb\n"
        "[getattr(eb, n) for n in eb.__all__]\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_type_stub_lists_every_public_name():
    """``__init__.pyi`` gives type checkers the lazily imported names: the same set as
    ``__all__``, each from the module the package resolves it from."""
    import ast
    from pathlib import Path

    stub = Path(empirical_batch.__file__).with_suffix(".pyi")
    tree = ast.parse(stub.read_text())
    typed = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                assert alias.asname == alias.name, f"{alias.name}: re-export as itself"
                typed[alias.name] = node.module
    declared = {n.target.id for n in tree.body
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    assert set(typed) | (declared & {"__version__"}) == set(empirical_batch.__all__)
    assert typed == dict(empirical_batch._EXPORTS)
