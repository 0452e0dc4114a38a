"""``edgeattn models``: the registered architectures with their parameter and MAC counts."""
import json

import click

from ..errors import EdgeAttnError

_GLOB_CHARS = set("*?[")


def _fmt_count(value, unit, scale, digits):
    return "{:.{}f}{}".format(value / scale, digits, unit) if value is not None else "-"


def _paper_cells(paper, resolution):
    # a paper may print another parameter count at another resolution (position encodings sized by the map)
    params = (paper.get("params_at") or {}).get(str(resolution)) or paper.get("params") or "-"
    macs = (paper.get("macs") or {}).get(str(resolution))
    return params, ("/".join(macs) if macs else "-")


def _rows(names, resolution):
    import torch

    from ..models import create_model, model_info
    from ..models.complexity import count_macs, count_params

    rows = []
    for name in names:
        info = model_info(name)
        row = {"name": name, "family": info["family"], "summary": info["summary"], "resolution": resolution,
               "params": None, "macs": None, "macs_fa": None, "attention_core_macs": None,
               "softmax_core_macs": None, "newton_raphson_macs": None, "paper": info["paper"], "error": None}
        try:
            with torch.device("meta"):
                model = create_model(name, img_size=resolution)
            macs = count_macs(model, resolution)
        except EdgeAttnError as error:
            row["error"] = error.format_message()
            rows.append(row)
            continue
        row.update(params=count_params(model), macs=macs["total"], macs_fa=macs["fa"],
                   attention_core_macs=macs["attention_core"], softmax_core_macs=macs["softmax_core"],
                   newton_raphson_macs=macs["iterative"])
        rows.append(row)
    return rows


def _table(rows, resolution):
    headers = ["model", "params", "MACs", "MACs FA", "of which NR", "paper params",
               "paper MACs nFA/FA @{}".format(resolution)]
    lines = []
    for row in rows:
        paper_params, paper_macs = _paper_cells(row["paper"], resolution)
        if row["error"]:
            lines.append([row["name"], "-", "-", "-", "-", paper_params, paper_macs])
            continue
        newton = _fmt_count(row["newton_raphson_macs"], "G", 1e9, 3) if row["newton_raphson_macs"] else "-"
        lines.append([row["name"], _fmt_count(row["params"], "M", 1e6, 2), _fmt_count(row["macs"], "G", 1e9, 3),
                      _fmt_count(row["macs_fa"], "G", 1e9, 3), newton, paper_params, paper_macs])
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *lines)]
    out = ["  ".join(str(cell).ljust(width) for cell, width in zip(headers, widths)).rstrip()]
    for line in lines:
        out.append("  ".join(str(cell).ljust(width) for cell, width in zip(line, widths)).rstrip())
    for row in rows:
        if row["error"]:
            out.append("not available at {}x{}: {}".format(resolution, resolution, row["error"]))
    return "\n".join(out)


@click.command(name="models")
@click.argument("pattern", required=False, default="*")
@click.option("--resolution", "-r", type=click.IntRange(min=1), default=224, show_default=True,
              help="Square input resolution the MACs are counted at.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def models(pattern, resolution, as_json):
    """List registered models with parameter count and MACs at --resolution.

    PATTERN is a shell-style glob over the names (a plain word matches as a substring), e.g. `cswin*` or `qtvit`.
    MACs are multiply-accumulates of one image (batch 1): every Conv/Linear plus the attention cores counted
    analytically; norms, activations, softmax exponentials and additions are not counted. "MACs FA" leaves out
    the softmax attention cores, like the ELFATT paper's FlashAttention column; "of which NR" is SOFT's
    Newton-Raphson pseudo-inverse, which the SOFT paper's FLOPs leave out. Paper columns quote the papers'
    tables where they state numbers for that architecture and resolution.
    """
    from ..models import list_models

    glob = pattern if _GLOB_CHARS & set(pattern) else "*{}*".format(pattern)
    names = list_models(glob)
    if not names:
        raise EdgeAttnError("no registered model matches {!r}; run `edgeattn models` for the list".format(pattern))
    rows = _rows(names, resolution)
    if all(row["error"] for row in rows):
        if len(rows) == 1:
            raise EdgeAttnError(rows[0]["error"])
        raise EdgeAttnError("none of the {} matching models accepts resolution {} (e.g. {})".format(
            len(rows), resolution, rows[0]["error"]))
    if as_json:
        from ..models.complexity import COUNTING_NOTE

        click.echo(json.dumps({"schema": "edgeattn.models/1", "resolution": resolution, "counting": COUNTING_NOTE,
                               "models": rows}, indent=2))
    else:
        click.echo(_table(rows, resolution))
