"""``edgeattn report DIR [--baseline MODEL]``: tables and plots from a sweep directory."""
import click


@click.command(name="report")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--baseline", default=None,
              help="Model to compare against in every mode (speedup = FPS / FPS of this model). The ELFATT "
                   "paper's speedup ratio (vs the slowest model of each mode) is always reported too.")
@click.option("--no-html", is_flag=True, help="Write report.md only (no report.html).")
@click.option("--no-plots", is_flag=True, help="Skip the PNG/SVG plots.")
def report(directory, baseline, no_html, no_plots):
    """Write DIR/report.md, DIR/report.html and DIR/plots/*.png|svg from DIR/results.json.

    Tables per precision: throughput per mode (mean ± std over repeats), speedup vs --baseline, the speedup
    ratio vs the slowest model in each mode (each table says which), mean power, energy per item and items/s
    per watt. Plots like the ELFATT paper's Fig. 4: FPS vs power mode, speedup vs power mode, FPS per watt.
    The throughput and speedup tables are also printed.
    """
    from ..report import build_report, summary_markdown

    written = build_report(directory, baseline=baseline, html=not no_html, plots=not no_plots)
    click.echo(summary_markdown(directory, baseline=baseline))
    click.echo("")
    for path in written:
        click.echo("wrote " + path)
