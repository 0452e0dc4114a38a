"""Power-mode sweeps: ``run_sweep(models, profile, ..., bench=run_benchmark)`` benchmarks models across a board's
power modes (or the host CPU's thread budgets) and writes results.json / results.csv; see :mod:`.runner`."""
from .results import CSV_COLUMNS, load_results
from .runner import SweepOutcome, run_sweep
from .signals import SweepInterrupted

__all__ = ["run_sweep", "SweepInterrupted", "SweepOutcome", "load_results", "CSV_COLUMNS"]
