"""One report page kept as Markdown and as HTML side by side, so that ``report DIR`` and ``report DIR DIR...``
write every table and plot the same way into both (report.md embeds the PNGs, report.html the SVGs)."""
import os

from .._io import atomic_write
from .tables import html_table, markdown_table

PLOT_FORMATS = ("png", "svg")


def escape(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_figure(figure, plot_dir, stem):
    """``plot_dir/stem.png`` and ``.svg`` (atomically); returns their paths."""
    from . import plots

    written = []
    for fmt in PLOT_FORMATS:
        path = os.path.join(plot_dir, "{}.{}".format(stem, fmt))
        with atomic_write(path, "wb") as handle:
            plots.save_figure(figure, handle, fmt)
        written.append(path)
    return written


class Page(object):
    """``markdown`` and ``html``: the lines of each version (``html`` starts with the caller's head)."""

    def __init__(self, markdown, html):
        self.markdown = list(markdown)
        self.html = list(html)

    def heading(self, level, text):
        self.markdown += ["{} {}".format("#" * level, text), ""]
        self.html.append("<h{0}>{1}</h{0}>".format(level, escape(text.replace("`", ""))))

    def table(self, level, title, header, rows):
        self.markdown += ["{} {}".format("#" * level, title), "", markdown_table(header, rows), ""]
        self.html += ["<h{0}>{1}</h{0}>".format(level, escape(title.replace("`", ""))), html_table(header, rows)]

    def plot(self, figure, plot_dir, stem, title):
        """Write ``figure`` under ``plot_dir`` and show it on the page; returns the written paths."""
        written = write_figure(figure, plot_dir, stem)
        directory = os.path.basename(plot_dir)
        self.markdown += ["![{}]({}/{}.png)".format(title, directory, stem), ""]
        self.html.append('<figure><img src="{}/{}.svg" alt="{}"></figure>'.format(
            directory, stem, escape(title).replace('"', "&quot;")))
        return written

    def write(self, out_dir, html=True):
        """``out_dir/report.md`` (and ``report.html``) atomically; returns their paths."""
        self.html.append("</body></html>")
        md_path = os.path.join(out_dir, "report.md")
        with atomic_write(md_path, "w") as handle:
            handle.write("\n".join(self.markdown))
        written = [md_path]
        if html:
            html_path = os.path.join(out_dir, "report.html")
            with atomic_write(html_path, "w") as handle:
                handle.write("\n".join(self.html) + "\n")
            written.append(html_path)
        return written
