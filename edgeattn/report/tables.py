"""Aggregate sweep rows and compute the tables: throughput, speedups, power and efficiency per mode and precision.

Two speedups, always labelled:

* **vs baseline**: FPS of a model divided by the FPS of an explicit ``--baseline`` model in the same mode and
  precision;
* **speedup ratio** as the ELFATT paper (Tables VIII/IX, Fig. 4) defines it: FPS divided by the FPS of the
  *slowest* model in the same column (mode x precision), so the reference model can change from column to column.
"""
import math

from ..errors import EdgeAttnError
from ..sweep.results import load_results

MISSING = "-"


class Cell(object):
    """Aggregate of the repeats of one model in one mode and precision."""

    def __init__(self, rows):
        self.rows = rows
        fps = [r["throughput_items_per_s"] for r in rows if r.get("throughput_items_per_s") is not None]
        self.n = len(fps)
        self.fps = sum(fps) / len(fps) if fps else None
        self.fps_std = _std(fps)
        power = [(r.get("power") or {}).get("total_w") for r in rows]
        power = [p for p in power if p is not None]
        self.power_w = sum(power) / len(power) if power else None
        energy = [r.get("energy_per_item_j") for r in rows if r.get("energy_per_item_j") is not None]
        self.energy_j = sum(energy) / len(energy) if energy else None
        self.energy_std = _std(energy)
        efficiency = [r.get("items_per_s_per_w") for r in rows if r.get("items_per_s_per_w") is not None]
        self.fps_per_w = sum(efficiency) / len(efficiency) if efficiency else None
        self.throttled = any(r.get("throttled") for r in rows)


def _std(values):
    if len(values) < 2:
        return 0.0 if values else None
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


class ModeColumn(object):
    def __init__(self, mode_id, name, budget_w, threads):
        self.id = mode_id
        self.name = name
        self.budget_w = budget_w
        self.threads = threads

    @property
    def sort_key(self):
        # By nominal budget (uncapped MAXN modes last), thread budgets ascending on host-cpu, then ID.
        if self.threads is not None:
            return (0, self.threads, self.id)
        return (0 if self.budget_w is not None else 1, self.budget_w or 0.0, self.id)


class SweepTables(object):
    """Rows grouped as ``cells[precision][model][mode_id] -> Cell`` with ordered modes and models."""

    def __init__(self, rows):
        self.rows = rows
        modes = {}
        models = []
        cells = {}
        for row in rows:
            mode_id = row["mode_id"]
            if mode_id not in modes:
                modes[mode_id] = ModeColumn(mode_id, row.get("mode_name") or str(mode_id), row.get("mode_budget_w"),
                                            row.get("mode_threads"))
            if row["model"] not in models:
                models.append(row["model"])
            cells.setdefault(row["precision"], {}).setdefault(row["model"], {}).setdefault(mode_id, []).append(row)
        self.modes = sorted(modes.values(), key=lambda m: m.sort_key)
        self.models = models
        self.precisions = sorted(cells, key=lambda p: (p != "fp32", p))
        self.cells = {p: {m: {i: Cell(rs) for i, rs in per_mode.items()} for m, per_mode in per_model.items()}
                      for p, per_model in cells.items()}

    def cell(self, precision, model, mode_id):
        return self.cells.get(precision, {}).get(model, {}).get(mode_id)

    def fps(self, precision, model, mode_id):
        cell = self.cell(precision, model, mode_id)
        return cell.fps if cell is not None else None

    def speedup_vs_baseline(self, precision, model, mode_id, baseline):
        value, base = self.fps(precision, model, mode_id), self.fps(precision, baseline, mode_id)
        if value is None or not base:
            return None
        return value / base

    def slowest(self, precision, mode_id):
        """(model, fps) of the slowest model in the column, or (None, None)."""
        present = [(self.fps(precision, m, mode_id), m) for m in self.models]
        present = [(f, m) for f, m in present if f]
        if not present:
            return None, None
        fps, model = min(present)
        return model, fps

    def speedup_ratio(self, precision, model, mode_id):
        """FPS over the slowest model's FPS in the same column (the ELFATT paper's "speedup ratio")."""
        value = self.fps(precision, model, mode_id)
        _, slowest = self.slowest(precision, mode_id)
        if value is None or not slowest:
            return None
        return value / slowest

    def models_in(self, precision):
        return [m for m in self.models if m in self.cells.get(precision, {})]

    def modes_in(self, precision):
        present = set()
        for per_mode in self.cells.get(precision, {}).values():
            present.update(per_mode)
        return [m for m in self.modes if m.id in present]


# --------------------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------------------
def load_sweep_tables(out_dir):
    """(results.json data, its rows, their :class:`SweepTables`) of the sweep in ``out_dir``; a sweep without result
    rows yet has nothing to report."""
    data = load_results(out_dir)
    rows = data.get("rows") or []
    if not rows:
        raise EdgeAttnError("{} has no result rows yet (status {}): nothing to report".format(
            out_dir, data.get("status")))
    return data, rows, SweepTables(rows)


def _fmt(value, digits=1, suffix=""):
    if value is None:
        return MISSING
    return "{:.{}f}{}".format(value, digits, suffix)


def table_sections(tables, precision, baseline=None):
    """The tables of one precision as (title, header, rows, note) tuples, rendered to markdown or HTML later."""
    models = tables.models_in(precision)
    modes = tables.modes_in(precision)
    header = ["model"] + [m.name for m in modes]
    sections = []

    def dagger(cell):
        return " †" if cell is not None and cell.throttled else ""

    rows = []
    repeats = set()
    for model in models:
        line = [model]
        for mode in modes:
            cell = tables.cell(precision, model, mode.id)
            if cell is None or cell.fps is None:
                line.append(MISSING)
                continue
            repeats.add(cell.n)
            spread = " ± {:.1f}".format(cell.fps_std) if cell.n > 1 else ""
            line.append("{:.1f}{}{}".format(cell.fps, spread, dagger(cell)))
        rows.append(line)
    n_text = "/".join(str(n) for n in sorted(repeats)) or "0"
    sections.append(("Throughput, items/s (mean ± std over {} repeat(s))".format(n_text), header, rows, None))

    if baseline:
        rows = [[model] + [_fmt(tables.speedup_vs_baseline(precision, model, mode.id, baseline), 2, "x")
                           for mode in modes] for model in models]
        note = None if baseline in models else "baseline {} has no {} results".format(baseline, precision)
        sections.append(("Speedup vs baseline `{}`: FPS / FPS of {} in the same mode".format(baseline, baseline),
                         header, rows, note))
    rows = [[model] + [_fmt(tables.speedup_ratio(precision, model, mode.id), 2, "x") for mode in modes]
            for model in models]
    slowest = ["slowest: " + ", ".join("{} {}".format(mode.name, tables.slowest(precision, mode.id)[0] or MISSING)
                                        for mode in modes)]
    sections.append(("Speedup ratio: FPS / FPS of the slowest model in the same mode (the ELFATT paper's "
                     "definition, Tables VIII/IX)", header, rows, slowest[0]))

    have_power = any((tables.cell(precision, m, mode.id) or Cell([])).power_w is not None
                     for m in models for mode in modes)
    if have_power:
        for title, attribute, digits in (("Mean power, W (total as labelled in results.csv)", "power_w", 2),
                                         ("Energy per item, J", "energy_j", 4),
                                         ("Items per second per watt", "fps_per_w", 2)):
            rows = []
            for model in models:
                line = [model]
                for mode in modes:
                    cell = tables.cell(precision, model, mode.id)
                    line.append(_fmt(getattr(cell, attribute) if cell is not None else None, digits))
                rows.append(line)
            sections.append((title, header, rows, None))
    return sections


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] + ["---:"] * (len(header) - 1)) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _html_escape(text):
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("`", ""))


def html_table(header, rows):
    parts = ["<table>", "<tr>" + "".join("<th>{}</th>".format(_html_escape(h)) for h in header) + "</tr>"]
    for row in rows:
        parts.append("<tr>" + "".join(
            "<td>{}</td>".format(_html_escape(c)) if i == 0 else '<td class="num">{}</td>'.format(_html_escape(c))
            for i, c in enumerate(row)) + "</tr>")
    parts.append("</table>")
    return "\n".join(parts)
