"""``edgeattn report DIR [--baseline MODEL]``: tables and plots from a sweep directory (or from an ops
benchmark's JSON file); ``edgeattn report DIR DIR... -o OUT``: one report over several sweeps."""
import os

import click


@click.command(name="report")
@click.argument("directories", metavar="DIR [DIR...]|OPS.json", nargs=-1, required=True, type=click.Path())
@click.option("-o", "--output", metavar="OUT", default=None,
              help="With several sweep directories: write the joined report (report.md, report.html, plots/) to "
                   "the directory OUT.")
@click.option("--baseline", default=None,
              help="Model to compare against in every mode (speedup = FPS / FPS of this model). The ELFATT "
                   "paper's speedup ratio (vs the slowest model of each mode) is always reported too.")
@click.option("--no-html", is_flag=True, help="Write report.md only (no report.html).")
@click.option("--no-plots", is_flag=True, help="Skip the PNG/SVG plots (no matplotlib needed).")
@click.option("--preset", default=None, metavar="NAME",
              help="Also print the paper table NAME (elfatt-table8, elfatt-table9) beside this sweep's numbers; "
                   "automatic for a sweep run with `edgeattn sweep --preset`.")
def report(directories, output, baseline, no_html, no_plots, preset):
    """Write DIR/report.md, DIR/report.html and DIR/plots/*.png|svg from DIR/results.json.

    Tables per precision: throughput per mode (mean ± std over repeats), speedup vs --baseline, the speedup
    ratio vs the slowest model in each mode (each table says which), mean power, energy per item and items/s
    per watt. Plots (matplotlib: pip install 'edgeattn[report]'): the ELFATT paper's Fig. 4 view, throughput and
    energy per item across the power modes with one line per model, and the speedup chart naming its baseline;
    error bars are ± one sample standard deviation over the repeats. report.md embeds the PNGs, report.html the
    SVGs. The throughput and speedup tables are also printed.

    Given several sweep directories and -o OUT (sweeps from several boards, JetPack releases or dates), one
    report in OUT joins them by run context: a table naming each sweep's board, JetPack, L4T, TensorRT, profile
    and date, then per precision the throughput, energy per item and power of every model in every board · mode
    column, and a plot of throughput (and energy per item) across them. Refused when two sweeps of the same board
    and software both measure a model in the same mode and precision, or when a sweep shares no model with the
    others.

    Given the JSON of `edgeattn ops-bench --json` (or benchmarks/ops_cpu.py) instead of a directory, it writes
    OPS.report.md and plots/OPS_latency_vs_tokens.png|svg beside it: median latency against tokens on log-log
    axes, one line per operator, interquartile range as error bars.
    """
    from ..errors import EdgeAttnError
    from ..report import build_ops_report, build_report, ops_summary_markdown, summary_markdown

    if len(directories) > 1 or output:
        if output is None:
            raise EdgeAttnError("several sweep directories need -o OUT for the joined report")
        if baseline or preset:
            raise EdgeAttnError("--baseline and --preset apply to the report of one sweep")
        from ..report.multi import build_multi_report, summary_markdown as multi_summary

        written = build_multi_report(list(directories), output, html=not no_html, plots=not no_plots)
        click.echo(multi_summary(list(directories)))
        click.echo("")
        for path in written:
            click.echo("wrote " + path)
        return
    directory = directories[0]

    if os.path.isfile(directory):
        if baseline:
            raise EdgeAttnError("--baseline applies to sweep directories, not to an ops benchmark file")
        if no_plots:
            raise EdgeAttnError("an ops benchmark report is its plot; --no-plots applies to sweep directories")
        if preset:
            raise EdgeAttnError("--preset applies to sweep directories, not to an ops benchmark file")
        from ..report import load_ops_record

        written = build_ops_report(directory)
        click.echo(ops_summary_markdown(load_ops_record(directory)))
        click.echo("")
        for path in written:
            click.echo("wrote " + path)
        return

    from ..report.paper_tables import paper_table_markdown, write_paper_table

    paper_markdown = paper_table_markdown(directory, preset)  # before anything is written: a bad preset is an error
    written = build_report(directory, baseline=baseline, html=not no_html, plots=not no_plots)
    click.echo(summary_markdown(directory, baseline=baseline))
    click.echo("")
    if paper_markdown:
        click.echo(paper_markdown)
        click.echo("")
        written.append(write_paper_table(directory, paper_markdown))
    for path in written:
        click.echo("wrote " + path)
