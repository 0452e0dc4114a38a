"""TensorRT version numbers as trtexec prints them.

``[TensorRT vNNNN]`` is ``NV_TENSORRT_VERSION``: MAJOR*1000 + MINOR*100 + PATCH on 8.x (``NvInferRuntimeCommon.h``),
MAJOR*10000 + MINOR*100 + PATCH from 10.0 (``NvInferRuntimeBase.h``); from 10.4 ``samples/common/logging.h`` appends
`` [b<build>]`` (NVIDIA/TensorRT, each release branch)."""
import re

_BANNER = re.compile(
    r"^&&&& (?P<status>RUNNING|PASSED|FAILED|WAIVED) TensorRT\.trtexec"
    r"(?: \[TensorRT v(?P<number>\d{1,9})\])?(?: \[b(?P<build>\d{1,9})\])? # (?P<command>.*)$",
    re.MULTILINE | re.ASCII,
)
# digit runs are bounded: a number of thousands of digits is no version (and int() refuses it on Python 3.11)
_VERSION_LINE = re.compile(r"\] \[I\] TensorRT version: (\d{1,6}(?:\.\d{1,6}){1,3})\s*$", re.MULTILINE | re.ASCII)


class TrtVersion(tuple):
    """``(major, minor, patch)`` with comparison against tuples: ``TrtVersion("8.6.2") >= (8, 6)``."""

    def __new__(cls, value, build=None):
        if isinstance(value, str):
            parts = value.strip().split(".")
            if not 2 <= len(parts) <= 4 or not all(p.isdigit() for p in parts):
                raise ValueError("not a TensorRT version: {!r}".format(value))
            numbers = [int(p) for p in parts[:3]]
        else:
            numbers = [int(p) for p in value][:3]
        while len(numbers) < 3:
            numbers.append(0)
        self = super(TrtVersion, cls).__new__(cls, numbers)
        self.build = build
        return self

    major = property(lambda self: self[0])
    minor = property(lambda self: self[1])
    patch = property(lambda self: self[2])

    def __str__(self):
        return "{}.{}.{}".format(*self)

    def __repr__(self):
        return "TrtVersion('{}')".format(self)


def decode_version_number(number):
    """``NV_TENSORRT_VERSION`` as printed in ``[TensorRT vNNNN]``.

    8.x: MAJOR*1000 + MINOR*100 + PATCH (v8201 -> 8.2.1; DRIVE's v8412 -> 8.4.12, the patch overflows its digit);
    9.x and later: MAJOR*10000 + MINOR*100 + PATCH (v100300 -> 10.3.0, v101602 -> 10.16.2).
    """
    number = int(number)
    if number >= 10000:
        return TrtVersion((number // 10000, (number // 100) % 100, number % 100))
    return TrtVersion((number // 1000, (number // 100) % 10, number % 100))


def parse_banners(text):
    """Every ``&&&&`` line: ``[{"status", "version" (TrtVersion or None for 7.x), "build", "command"}]``."""
    found = []
    for match in _BANNER.finditer(text):
        number = match.group("number")
        version = decode_version_number(number) if number else None
        build = int(match.group("build")) if match.group("build") else None
        if version is not None:
            version.build = build
        found.append({"status": match.group("status"), "version": version, "build": build,
                      "command": match.group("command")})
    return found


def version_from_output(text):
    """The TensorRT version of a trtexec run: the ``TensorRT version: X.Y.Z`` line if present (exact patch, e.g.
    DRIVE's 8.4.12), else the banner. None if neither is there."""
    match = _VERSION_LINE.search(text)
    banners = parse_banners(text)
    build = banners[0]["build"] if banners else None
    if match:
        return TrtVersion(match.group(1), build=build)
    for banner in banners:
        if banner["version"] is not None:
            return banner["version"]
    return None
