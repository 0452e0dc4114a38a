"""``edgeattn power LOG [--json]``: summarise a tegrastats log."""
import json

import click


def _fmt(stats, unit, digits=2):
    if not stats:
        return "-"
    template = "{:.%df}" % digits
    return "mean {} / min {} / max {} {}".format(template.format(stats["mean"]), template.format(stats["min"]),
                                                 template.format(stats["max"]), unit)


@click.command(name="power")
@click.argument("log")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def power(log, as_json):
    """Summarise the tegrastats log LOG (any JetPack 4-7 format): per-rail and total power, energy, GPU load and
    clock, temperatures, sample count and time span. Lines that cannot be parsed are counted, never fatal.

    The total is VDD_IN / POM_5V_IN when the board has it, else the sum of the rails (AGX Orin), as labelled.
    """
    from ..jetson.power import summarise_log

    summary = summarise_log(log)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    click.echo("log: {}".format(summary["path"]))
    click.echo("samples: {}  unparsed lines: {}".format(summary["samples"], summary["unparsed_lines"]))
    for example in summary["unparsed_examples"]:
        click.echo("  unparsed line {}: {}".format(example["line"], example["text"]))
    span = summary["time_span"]
    if span:
        click.echo("time span: {:.0f} s (from the log's timestamps)".format(span["duration_s"]))
    else:
        click.echo("time span: unknown (the log has no timestamps)")
    for name, stats in summary["rails_w"].items():
        click.echo("rail {:<18} {}".format(name, _fmt(stats, "W", 3)))
    if summary["total_w"]:
        click.echo("total ({})  {}".format(summary["total_w"]["rail"], _fmt(summary["total_w"], "W", 3)))
    if summary["energy_j"] is not None:
        click.echo("energy: {:.1f} J over the time span".format(summary["energy_j"]))
    click.echo("GPU load: {}".format(_fmt(summary["gpu"]["util_pct"], "%", 1)))
    click.echo("GPU clock: {}".format(_fmt(summary["gpu"]["freq_mhz"], "MHz", 0)))
    for name, stats in summary["temperatures_c"].items():
        click.echo("temp {:<10} {}".format(name, _fmt(stats, "C", 1)))
