"""The one way edgeattn runs external tools (trtexec, nvpmodel, jetson_clocks, tegrastats, sudo).

Argument lists only (never a shell), a timeout always, and stdin closed unless the caller passes the exact text
to feed (nvpmodel's reboot prompt is answered this way).
"""
import shutil
import subprocess

from .errors import EdgeAttnError


class CommandResult(object):
    __slots__ = ("args", "returncode", "stdout", "stderr")

    def __init__(self, args, returncode, stdout, stderr):
        self.args = list(args)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr

    @property
    def output(self):
        """stdout and stderr together, in that order (tools mix their messages across both)."""
        return self.stdout + ("\n" if self.stdout and self.stderr else "") + self.stderr

    def __repr__(self):
        return "CommandResult(args={!r}, returncode={})".format(self.args, self.returncode)


def which(name, path=None):
    return shutil.which(name, path=path)


def run_command(args, timeout, input_text=None, check=False, env=None, cwd=None):
    """Run ``args`` and return a :class:`CommandResult`.

    ``timeout`` is required (seconds). ``input_text`` is written to stdin and stdin is then closed; without it
    stdin is /dev/null so a prompt can never hang the run. A missing executable or a timeout raises
    :class:`EdgeAttnError`; a non-zero exit raises only when ``check`` is true.
    """
    if isinstance(args, (str, bytes)):
        raise TypeError("run_command takes an argument list, not a shell string")
    args = [str(a) for a in args]
    # With input_text, subprocess feeds it through a pipe and closes it; otherwise stdin is /dev/null.
    feed = {"input": input_text} if input_text is not None else {"stdin": subprocess.DEVNULL}
    try:
        proc = subprocess.run(
            args,
            **feed,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
            timeout=timeout,
            env=env,
            cwd=cwd
        )
    except FileNotFoundError:
        raise EdgeAttnError("command not found: {}".format(args[0]))
    except PermissionError:
        raise EdgeAttnError("command is not executable: {}".format(args[0]))
    except subprocess.TimeoutExpired:
        raise EdgeAttnError("command timed out after {:g} s: {}".format(timeout, " ".join(args)))
    result = CommandResult(args, proc.returncode, proc.stdout or "", proc.stderr or "")
    if check and result.returncode != 0:
        last = [line for line in result.output.strip().splitlines() if line.strip()]
        detail = last[-1].strip() if last else "no output"
        raise EdgeAttnError("{} exited with status {}: {}".format(args[0], result.returncode, detail))
    return result
