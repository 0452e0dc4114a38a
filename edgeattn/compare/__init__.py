"""``edgeattn compare A B``: run two models on the same inputs and compare their outputs.

A side is an ONNX file (ONNX Runtime CPU), a TensorRT engine (TensorRT's Python runtime, or trtexec with
``--loadInputs`` / ``--exportOutput``), or a checkpoint with its architecture (PyTorch FP32 on the CPU, the reference
operators; torch is imported only for such a side). Polygraphy is the anchor: ONNX files and engines run through
its ONNX Runtime and TensorRT runners, and its comparator (``SimpleCompareFunc``, element-wise) decides whether
the outputs agree: an element fails when it is outside both ``atol`` and ``rtol`` (relative to B, the reference).

Inputs: ``count`` seeded standard-normal batches (the distribution of a normalised image), or real pictures
(``images``: a directory, or ``"skimage"`` for the sample photographs that ship with scikit-image), resized so
that the shorter side is the input size / 0.875 (bicubic), centre-cropped and normalised with the ImageNet mean
and standard deviation, which is what every model in the zoo expects.

Besides Polygraphy's max/mean absolute and relative errors, the report has per-sample cosine similarity and, for
classifier outputs (N, C >= 5), top-1 agreement (same arg-max) and top-5 agreement (mean overlap of the two top-5
sets). The comparison fails (``passed`` False; CLI exit 1) when Polygraphy's check fails or top-1 agreement is
below ``min_top1``.

Modules: :mod:`.inputs` (what both sides run on), :mod:`.sides` (opening and running each side), :mod:`.metrics`
(matching outputs, Polygraphy's comparator, cosine and top-k agreement), :mod:`.report` (``compare_models`` and
its text), :mod:`.layers` (``--layers``: every intermediate tensor, ONNX Runtime and TensorRT sides), :mod:`.check`
(``edgeattn build --check``).
"""
from .check import CHECK_INPUTS, CHECK_TOLERANCES, check_engine, format_check
from .inputs import (CROP_FRACTION, DEFAULT_INPUTS, IMAGE_EXTENSIONS, IMAGENET_MEAN, IMAGENET_STD, SKIMAGE_PICTURES,
                     import_pillow, make_inputs, preprocess, sample_pictures, write_sample_pictures)
from .metrics import DEFAULT_ATOL, DEFAULT_RTOL, class_agreement
from .report import SCHEMA, compare_models, format_report
from .sides import parse_exported_outputs

__all__ = ["CHECK_INPUTS", "CHECK_TOLERANCES", "CROP_FRACTION", "DEFAULT_ATOL", "DEFAULT_INPUTS", "DEFAULT_RTOL",
           "IMAGE_EXTENSIONS", "IMAGENET_MEAN", "IMAGENET_STD", "SCHEMA", "SKIMAGE_PICTURES", "check_engine",
           "class_agreement", "compare_models", "format_check", "format_report", "import_pillow", "make_inputs",
           "parse_exported_outputs", "preprocess", "sample_pictures", "write_sample_pictures"]
