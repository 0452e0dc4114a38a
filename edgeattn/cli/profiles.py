"""``edgeattn profiles [NAME] [--json]``: list the board profiles or show one."""
import json

import click


def _cap(value, unit):
    if value is None:
        return "?"
    if value == -1:
        return "none"
    if unit == "khz":
        return "{:g}".format(value / 1000.0)
    return "{:g}".format(value / 1e6)


@click.command(name="profiles")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def profiles(name, as_json):
    """List board power-mode profiles, or show profile NAME (modes, caps, reboot groups, JetPack table).

    Caps are in MHz; "none" means the mode does not cap that clock, "?" that the reference gives no value.
    Mode IDs are read from the board at sweep time; a profile is the cross-check.
    """
    from .. import profiles as profiles_io

    if name:
        profile = profiles_io.load_profile(name)
        if as_json:
            click.echo(json.dumps(profile.to_dict(), indent=2))
            return
        _show(profile)
        return
    loaded = profiles_io.load_all_profiles()
    if as_json:
        click.echo(json.dumps([p.to_dict() for p in loaded], indent=2))
        return
    click.echo("{:<16} {:<32} {}".format("NAME", "BOARD", "MODES (default marked *)"))
    for profile in loaded:
        if profile.is_jetson:
            parts = []
            for key, table in profile.mode_tables.items():
                modes = ",".join("{}{}".format(m.name, "*" if m.id == table.default_mode else "")
                                 for m in table.modes)
                parts.append("{}: {}".format(key, modes) if len(profile.mode_tables) > 1 else modes)
            click.echo("{:<16} {:<32} {}".format(profile.name, profile.display_name, "; ".join(parts)))
        else:
            budgets = profile.host_thread_budgets()
            click.echo("{:<16} {:<32} threads {}".format(profile.name, profile.display_name,
                                                         ",".join(map(str, budgets))))


def _show(profile):
    click.echo("{} - {}".format(profile.name, profile.display_name))
    if profile.description:
        click.echo(profile.description)
    if not profile.is_jetson:
        click.echo("modes: CPU thread budgets {} (this machine)".format(
            ", ".join(map(str, profile.host_thread_budgets()))))
        return
    click.echo("soc {}  compute capability {}  DLA {}".format(profile.soc, profile.compute_capability,
                                                            "yes" if profile.has_dla else "no"))
    click.echo("module ids: {}".format(", ".join(profile.module_ids)))
    click.echo("compatible: {}".format(", ".join(profile.compatible)))
    click.echo("power total rail: {}".format(profile.power.get("total_rail") or "none (sum of rails)"))
    for key, table in profile.mode_tables.items():
        click.echo("")
        click.echo("mode table {!r}: {} (default mode {})".format(key, table.conf_file, table.default_mode))
        if table.applies_to:
            click.echo("  " + table.applies_to)
        click.echo("  {:>3} {:<12} {:>7} {:>5} {:>8} {:>8} {:>8} {:>5} {:>5} {}".format(
            "ID", "NAME", "BUDGET", "CORES", "CPU MHz", "GPU MHz", "EMC MHz", "TPC", "FBP", "REBOOT GROUP"))
        for mode in table.modes:
            click.echo("  {:>3} {:<12} {:>7} {:>5} {:>8} {:>8} {:>8} {:>5} {:>5} {}{}".format(
                mode.id, mode.name, "{:g}W".format(mode.budget_w) if mode.budget_w is not None else "-",
                mode.online_cores if mode.online_cores is not None else "?",
                _cap(mode.cpu_max_khz, "khz"), _cap(mode.gpu_max_hz, "hz"), _cap(mode.emc_max_hz, "hz"),
                mode.tpc_pg_mask if mode.tpc_pg_mask is not None else "?",
                mode.fbp_pg_mask if mode.fbp_pg_mask is not None else "?",
                mode.reboot_group or "?", "  (unverified)" if mode.unverified else ""))
    if profile.software:
        click.echo("")
        click.echo("JetPack -> TensorRT / CUDA:")
        for row in profile.software:
            click.echo("  L4T {:<10} JetPack {:<8} TensorRT {:<8} CUDA {}".format(
                row["l4t"], row["jetpack"], row["tensorrt"] or "?", row["cuda"] or "?"))
