"""The fuzz tests: hypothesis on every parser and loader, file-kind recognition, and a few fault-injected sweeps
on the fake boards. Every hypothesis test runs a fixed-seed sample (``derandomize``) so CI is reproducible; the
longer random run is ``benchmarks/fuzz.py``."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "bench"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "sweep"))
