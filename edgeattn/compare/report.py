"""``compare_models``: both sides on the same inputs, the report dict (schema ``edgeattn.compare/1``) and its
text."""
from ..errors import EdgeAttnError
from .inputs import make_inputs
from .metrics import DEFAULT_ATOL, DEFAULT_RTOL, _common_outputs, _polygraphy_compare, class_agreement
from .sides import ENGINE_BACKENDS, _input_size, _polygraphy, open_side

SCHEMA = "edgeattn.compare/1"


def compare_models(a, b, arch=None, checkpoint_key=None, count=None, images=None, seed=0, atol=DEFAULT_ATOL,
                   rtol=DEFAULT_RTOL, min_top1=None, backend="auto", plugins=None, trtexec=None,
                   trust_pickle=False, allow_engine_host_code=False, timeout=None, progress=None, layers=False,
                   engine_batch=None, marked_build=None):
    """Run ``a`` and ``b`` on the same inputs and compare (B is the reference); returns the report dict (schema
    ``edgeattn.compare/1``). Bad input raises :class:`EdgeAttnError`; a failed comparison is ``passed: False``.
    ``layers``: also compare every intermediate tensor both models share (:mod:`.layers`; ONNX files and
    engines); ``"on_failure"``: only when the comparison fails, a side that cannot give its tensors then being
    recorded as ``{"not_compared": why}`` instead of refused. ``marked_build``: ``edgeattn.engine``'s
    ``build_marked_engine`` (it sits above compare), needed for an engine side with ``layers``.
    ``engine_batch``: run engine sides exactly this many samples at a time (a profile corner's batch)."""
    if atol < 0 or rtol < 0:
        raise EdgeAttnError("--atol and --rtol must be >= 0")
    if min_top1 is not None and not 0.0 <= min_top1 <= 1.0:
        raise EdgeAttnError("--min-top1 is a fraction between 0 and 1, got {}".format(min_top1))
    if backend not in ENGINE_BACKENDS:
        raise EdgeAttnError("unknown engine backend {!r} (choose {})".format(backend, ", ".join(ENGINE_BACKENDS)))
    _polygraphy("edgeattn compare")
    say = progress or (lambda message: None)
    sides = []
    try:
        for path in (a, b):
            sides.append(open_side(path, arch=arch, checkpoint_key=checkpoint_key, trust_pickle=trust_pickle,
                                   backend=backend, plugins=plugins, trtexec=trtexec,
                                   allow_engine_host_code=allow_engine_host_code, timeout=timeout))
        if layers is True:
            from .layers import check_layer_sides

            check_layer_sides(sides, marked_build)  # before anything runs
        for side in sides:
            if side.kind == "engine" and engine_batch:
                side.chunk = int(engine_batch)
        chw = _input_size(sides)
        batch, described = make_inputs(chw, count=count, images=images, seed=seed)
        outputs = []
        for label, side in zip("AB", sides):
            say("running {} ({}, {}) on {} input(s)".format(label, side.path, side.backend, len(batch)))
            outputs.append(side.run(batch))
    finally:
        for side in sides:
            side.close()
    passed, report = _report(sides, outputs, batch, described, a, b, atol, rtol, min_top1)
    if layers is True or (layers == "on_failure" and not passed):
        report["layers"] = _layers(sides, batch, atol, rtol, marked_build, plugins, say, layers == "on_failure")
    return report


def _report(sides, outputs, batch, described, a, b, atol, rtol, min_top1):
    out_a, out_b = _common_outputs(outputs[0], outputs[1], a, b)
    for name in out_b:
        if out_a[name].shape != out_b[name].shape:
            raise EdgeAttnError("output {} has shape {} in {} but {} in {}".format(
                name, list(out_a[name].shape), a, list(out_b[name].shape), b))
    per_output = _polygraphy_compare(out_a, out_b, atol, rtol)
    primary = next(iter(out_b))
    agreement = class_agreement(out_a[primary], out_b[primary])
    failures = ["output {}: outside --atol {:g} and --rtol {:g} (max abs {:.3g}, max rel {:.3g})".format(
        name, atol, rtol, entry["max_abs"] or float("nan"), entry["max_rel"] or float("nan"))
        for name, entry in per_output.items() if not entry["passed"]]
    if min_top1 is not None:
        if agreement["top1"] is None:
            raise EdgeAttnError("--min-top1 needs a classifier output (N x C, C >= 5); {} is {}".format(
                primary, list(out_b[primary].shape)))
        if agreement["top1"] < min_top1:
            failures.append("top-1 agreement {:.4f} < --min-top1 {:g}".format(agreement["top1"], min_top1))
    return not failures, {
        "schema": SCHEMA,
        "a": sides[0].describe(),
        "b": sides[1].describe(),
        "reference": "b",
        "inputs": dict(described, shape=[int(d) for d in batch.shape]),
        "tolerances": {"atol": atol, "rtol": rtol, "check": "polygraphy elemwise (fails where both exceeded)",
                       "min_top1": min_top1},
        "outputs": per_output,
        "primary_output": primary,
        "cosine_min": agreement["cosine_min"],
        "cosine_mean": agreement["cosine_mean"],
        "top1_agreement": agreement["top1"],
        "top5_agreement": agreement["top5"],
        "passed": not failures,
        "failures": failures,
        "layers": None,
    }


def _layers(sides, batch, atol, rtol, marked_build, plugins, say, on_failure):
    from .layers import compare_layers

    say("comparing every intermediate tensor of {} and {}".format(sides[0].path, sides[1].path))
    try:
        return compare_layers(sides, batch, atol, rtol, marked_build=marked_build, plugins=plugins, progress=say)
    except EdgeAttnError as error:
        if not on_failure:
            raise
        return {"not_compared": error.format_message()}


def format_report(report):
    """The CLI's summary lines."""

    def side(record):
        text = "{} ({}, {})".format(record["path"], record["kind"], record["backend"])
        if record.get("precision"):
            text += " {}".format(record["precision"])
        if record.get("arch"):
            text += " {}".format(record["arch"])
        return text

    inputs = report["inputs"]
    if inputs["source"] == "random":
        where = "{} random input(s), seed {}".format(inputs["count"], inputs["seed"])
    else:
        where = "{} picture(s) from {}".format(inputs["count"], inputs.get("directory") or "scikit-image")
    lines = ["compared A {}".format(side(report["a"])),
             "  with   B {} (reference)".format(side(report["b"])),
             "  inputs   {} ({})".format(where, "x".join(str(d) for d in inputs["shape"]))]
    for name, entry in report["outputs"].items():
        lines.append("  {:<8} max abs {}, max rel {}, mean abs {} ({})".format(
            name, _fmt(entry["max_abs"]), _fmt(entry["max_rel"]), _fmt(entry["mean_abs"]),
            "ok" if entry["passed"] else "FAILED"))
    lines.append("  cosine   min {}, mean {}".format(_fmt6(report["cosine_min"]), _fmt6(report["cosine_mean"])))
    if report["top1_agreement"] is not None:
        lines.append("  top-1    {:.1%} agreement, top-5 overlap {:.1%}".format(report["top1_agreement"],
                                                                              report["top5_agreement"]))
    tolerances = report["tolerances"]
    if report["passed"]:
        lines.append("  result   PASSED (atol {:g}, rtol {:g}{})".format(
            tolerances["atol"], tolerances["rtol"],
            ", min top-1 {:g}".format(tolerances["min_top1"]) if tolerances["min_top1"] is not None else ""))
    else:
        lines.append("  result   FAILED: {}".format("; ".join(report["failures"])))
    if report.get("layers"):
        from .layers import format_layers

        lines.extend(format_layers(report["layers"], tolerances) if "not_compared" not in report["layers"]
                     else ["  layers   not compared: {}".format(report["layers"]["not_compared"])])
    return lines


def _fmt(value):
    return "n/a" if value is None else "{:.3g}".format(value)


def _fmt6(value):
    return "n/a (not finite)" if value is None else "{:.6f}".format(value)
