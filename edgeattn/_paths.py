"""Where the data that lives beside the package is found: op schemas (export/schemas) and board profiles
(profiles/). Both are top-level folders of the repository, shared with the C++ plugins and the board scripts,
so the package reads them from the checkout it is installed from (``pip install -e .``); an environment
variable points elsewhere."""
import os

from .errors import EdgeAttnError

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def repo_root():
    return _REPO_ROOT


def _data_dir(env_var, relative, what):
    override = os.environ.get(env_var)
    if override:
        if not os.path.isdir(override):
            raise EdgeAttnError("{}={} is not a directory".format(env_var, override))
        return override
    candidate = os.path.join(_REPO_ROOT, *relative.split("/"))
    if os.path.isdir(candidate):
        return candidate
    raise EdgeAttnError(
        "cannot find the {} directory (looked in {}); install edgeattn from its source tree with "
        "`pip install -e .` or set {}".format(what, candidate, env_var)
    )


def schema_dir():
    return _data_dir("EDGEATTN_SCHEMA_DIR", "export/schemas", "op schema")


def profile_dir():
    return _data_dir("EDGEATTN_PROFILE_DIR", "profiles", "board profile")
