"""``edgeattn build --check``: a just-built engine against its ONNX file, recorded in the engine's manifest."""
import os

from .report import SCHEMA, _fmt, _fmt6, compare_models

#: ``edgeattn build --check``: element-wise tolerances per engine precision (TensorRT FP32 may run matrix
#: products in TF32, FP16 engines keep only the normalisations in FP32)
#: int8: the reference is the same Q/DQ graph on ONNX Runtime, so only TensorRT's FP16 outside the quantized layers
#: and its own INT8 rounding differ: the fp16 tolerance (GPU-unverified)
CHECK_TOLERANCES = {"fp32": (1e-2, 1e-2), "fp16": (5e-2, 5e-2), "int8": (5e-2, 5e-2)}
CHECK_INPUTS = 8


def profile_corners(manifest):
    """The batch sizes of the engine profile's corners (min, opt, max of the first input's batch dimension, each
    once) when only the batch is dynamic; ``[None]`` (the default chunks) otherwise: compare feeds one fixed
    C x H x W."""
    profiles = (manifest or {}).get("profiles") or []
    if not profiles or len(profiles[0]["inputs"]) != 1:
        return [None]
    entry = next(iter(profiles[0]["inputs"].values()))
    low, opt, high = entry["min"], entry["opt"], entry["max"]
    if not low or low[1:] != high[1:] or low[0] == high[0]:
        return [None]
    corners = []
    for dims in (low, opt, high):
        if dims[0] not in corners:
            corners.append(int(dims[0]))
    return corners


def check_engine(engine_path, onnx_path, precision="fp32", backend="auto", plugins=None, trtexec=None,
                 progress=None, marked_build=None):
    """``edgeattn build --check``: compare a just-built engine (A) with its ONNX file on ONNX Runtime CPU (B) on
    seeded inputs at every corner of its optimization profile (the min, opt and max batch, at least
    :data:`CHECK_INPUTS` inputs each), and record the outcome under ``"check"`` in the engine's manifest. Returns
    the compare report of the worst corner with ``"corners"`` added; ``report["passed"]`` says whether the engine
    agrees within :data:`CHECK_TOLERANCES` at every corner. At the first corner that fails, every tensor of
    the engine (rebuilt by ``marked_build`` with every tensor marked, :mod:`.layers`) is compared with the ONNX's
    too: ``report["layers"]`` names the first divergent tensor, or why it could not be compared."""
    from .._io import outputs_now, write_json
    from ..tensorrt import manifest as manifest_module

    atol, rtol = CHECK_TOLERANCES.get(precision, CHECK_TOLERANCES["fp32"])
    corners = []
    worst = None
    layers = None
    for batch in profile_corners(manifest_module.read_manifest(engine_path)):
        count = CHECK_INPUTS if batch is None else batch * -(-CHECK_INPUTS // batch)
        if progress is not None and batch is not None:
            progress("profile corner batch {}: {} inputs".format(batch, count))
        report = compare_models(engine_path, onnx_path, count=count, atol=atol, rtol=rtol, backend=backend,
                                plugins=plugins, trtexec=trtexec, progress=progress, engine_batch=batch,
                                layers="on_failure" if layers is None else False, marked_build=marked_build)
        layers = layers or report["layers"]
        primary = report["outputs"][report["primary_output"]]
        corners.append({"batch": batch, "inputs": count, "passed": report["passed"], "max_abs": primary["max_abs"],
                        "max_rel": primary["max_rel"], "failures": report["failures"]})
        if worst is None or (worst["passed"] and not report["passed"]) or (
                worst["passed"] == report["passed"] and (primary["max_abs"] or 0.0) >
                (worst["outputs"][worst["primary_output"]]["max_abs"] or 0.0)):
            worst = report
    report = dict(worst, corners=corners, passed=all(corner["passed"] for corner in corners), layers=layers,
                  failures=["batch {}: {}".format(c["batch"], f) if c["batch"] is not None else f
                            for c in corners for f in c["failures"]])
    manifest = manifest_module.read_manifest(engine_path) or {}
    primary = report["outputs"][report["primary_output"]]
    manifest["check"] = {
        "schema": SCHEMA, "against": report["b"]["path"], "reference_backend": report["b"]["backend"],
        "engine_backend": report["a"]["backend"], "inputs": report["inputs"], "tolerances": report["tolerances"],
        "passed": report["passed"], "failures": report["failures"], "output": report["primary_output"],
        "max_abs": primary["max_abs"], "max_rel": primary["max_rel"], "mean_abs": primary["mean_abs"],
        "cosine_min": report["cosine_min"], "top1_agreement": report["top1_agreement"],
        "top5_agreement": report["top5_agreement"], "corners": corners,
        "first_divergent": (layers or {}).get("first_divergent"), "layers_not_compared": (layers or {}).get(
            "not_compared")}
    with outputs_now():  # recorded even when the check fails
        write_json(manifest_module.manifest_path(engine_path), manifest)
    return report


def format_check(report):
    """The lines ``edgeattn build --check`` adds to the build summary."""
    primary = report["outputs"][report["primary_output"]]
    line = "  check      {} vs {} on ONNX Runtime CPU ({} inputs): max abs {}, max rel {}, cosine min {}".format(
        "PASSED" if report["passed"] else "FAILED", os.path.basename(report["b"]["path"]),
        report["inputs"]["count"], _fmt(primary["max_abs"]), _fmt(primary["max_rel"]), _fmt6(report["cosine_min"]))
    lines = [line]
    if len(report.get("corners") or ()) > 1:
        lines.append("             profile corners: " + ", ".join(
            "batch {} {} (max abs {})".format(c["batch"], "ok" if c["passed"] else "FAILED", _fmt(c["max_abs"]))
            for c in report["corners"]))
    if report["top1_agreement"] is not None:
        lines.append("             top-1 {:.1%}, top-5 overlap {:.1%} (atol {:g}, rtol {:g})".format(
            report["top1_agreement"], report["top5_agreement"], report["tolerances"]["atol"],
            report["tolerances"]["rtol"]))
    lines.extend("             {}".format(failure) for failure in report["failures"])
    layers = report.get("layers")
    if layers:
        from .layers import first_divergence_line

        lines.append("  layers     {}".format(first_divergence_line(layers, report["tolerances"])
                                              if "not_compared" not in layers
                                              else "not compared: " + layers["not_compared"]))
    return lines
