"""The sweep's resume file (``DIR/sweep-state.json``): what was asked, the original board state, the plan, and
where the sweep stopped. Written atomically whenever it changes; ``--resume`` reads it after a reboot, a failure
or an interruption, so the original mode and clocks are known even when the board has rebooted since."""
import os

from .._io import read_json, write_json
from ..errors import EdgeAttnError

STATE_FILE = "sweep-state.json"
STATE_SCHEMA = "edgeattn.sweep-state/1"


def state_path(out_dir):
    return os.path.join(out_dir, STATE_FILE)


def save_state(out_dir, state):
    state = dict(state)
    state["schema"] = STATE_SCHEMA
    write_json(state_path(out_dir), state)


def load_state(out_dir):
    path = state_path(out_dir)
    if not os.path.isfile(path):
        raise EdgeAttnError("nothing to resume: {} does not exist (start the sweep without --resume)".format(path))
    # every number of the file is finite as the sweep wrote it (options checked, board readings parsed finite)
    return read_json(path, "an edgeattn sweep resume file", schema=STATE_SCHEMA, what="the resume file", finite=True)
