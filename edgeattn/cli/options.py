"""Options that several commands share, declared once here and subscribed to by each command (the way
Polygraphy's tools share argument groups), so that one spelling has one meaning everywhere:

* ``--plugins on|off|auto``: which custom ops run as TensorRT plugins (``build``, ``sweep``);
* ``--plugin-lib LIB``: the edgeattn plugin library (``build``, ``bench``, ``compare``); the old
  ``--plugins LIB`` spelling of ``bench`` and ``compare`` is refused with one line naming ``--plugin-lib``;
* ``--backend``, ``--trtexec PATH``, ``--allow-engine-host-code``.

Each function returns a decorator; the command's parameter names stay what they were (``plugin_mode``,
``plugin_lib``, ``backend``, ``trtexec_path``, ``allow_engine_host_code``).
"""
import click

from ..engine.plugin_selection import MODES as PLUGIN_MODES  # on, off, auto
from ..errors import EdgeAttnError

PLUGIN_MODE_HELP = (
    "Which custom ops run as TensorRT plugins. on: all (needs the plugin library); off: none, each is replaced by "
    "its standard-op decomposition (no plugin library needed); auto: build with and without each custom-op "
    "family, time every candidate like `edgeattn bench` and keep the fastest (up to 4 builds for the registered models). Default: auto where this machine "
    "can time engines (trtexec, or TensorRT with a CUDA runtime), else on.")


def _plugin_mode(ctx, param, value):
    if value is None or value in PLUGIN_MODES:
        return value
    raise EdgeAttnError("--plugins takes {}, not {!r}; a plugin library is given with --plugin-lib LIB".format(
        ", ".join(PLUGIN_MODES[:-1]) + " or " + PLUGIN_MODES[-1], value))


def plugin_mode_option(help=PLUGIN_MODE_HELP):
    """``--plugins on|off|auto`` -> ``plugin_mode`` (None: the command's default). Anything else is refused in one
    line naming ``--plugin-lib``."""
    return click.option("--plugins", "plugin_mode", metavar="|".join(PLUGIN_MODES), default=None,
                        callback=_plugin_mode, help=help)


def _old_plugins_spelling(ctx, param, value):
    if value is None:
        return None
    raise EdgeAttnError("`{} --plugins LIB` is now `--plugin-lib LIB`; pass --plugin-lib {}".format(
        ctx.info_name, value))


def plugin_lib_option(help="edgeattn plugin library (default: $EDGEATTN_PLUGIN_LIB, then the package and build "
                           "folders).", refuse_old_spelling=False):
    """``--plugin-lib LIB`` -> ``plugin_lib``. ``refuse_old_spelling``: also accept ``--plugins LIB`` (hidden) only
    to refuse it with one line naming ``--plugin-lib`` (commands where ``--plugins`` used to be the library)."""
    library = click.option("--plugin-lib", "plugin_lib", metavar="LIB", default=None, help=help)
    if not refuse_old_spelling:
        return library
    old = click.option("--plugins", "old_plugins", metavar="LIB", default=None, hidden=True, expose_value=False,
                       callback=_old_plugins_spelling, is_eager=True)
    return lambda function: old(library(function))


def backend_option(choices, help):
    """``--backend`` with ``choices`` (auto first), default auto."""
    return click.option("--backend", type=click.Choice(tuple(choices)), default="auto", show_default=True, help=help)


def trtexec_option():
    """``--trtexec PATH`` -> ``trtexec_path``."""
    return click.option("--trtexec", "trtexec_path", metavar="PATH", default=None,
                        help="trtexec executable (default: $EDGEATTN_TRTEXEC, PATH, /usr/src/tensorrt/bin/trtexec).")


def allow_engine_host_code_option(help="Let TensorRT run host code embedded in a version-compatible engine (its "
                                       "plugin library). Only for engines you built or trust: the engine's manifest "
                                       "never switches this on."):
    """``--allow-engine-host-code`` flag."""
    return click.option("--allow-engine-host-code", is_flag=True, help=help)
