"""Calibration inputs for ``edgeattn quantize``: pictures from a directory, scikit-image's bundled photographs, or
random normal tensors; preprocessed as every model of the zoo expects (the same as ``edgeattn compare --images``:
shorter side to size / 0.875, bicubic, centre crop, ImageNet mean/std; :func:`edgeattn.compare.preprocess`)."""
import os

import numpy as np

from ..errors import EdgeAttnError

DEFAULT_SIZE = 32
SOURCES_HELP = "DIR (pictures), 'skimage' (scikit-image's bundled photographs) or 'random' (not representative)"


def _pictures_in(directory, limit, warn):
    from ..compare import IMAGE_EXTENSIONS, import_pillow

    Image = import_pillow()
    names = sorted(name for name in os.listdir(directory) if name.lower().endswith(IMAGE_EXTENSIONS))
    if not names:
        raise EdgeAttnError("--calib {}: no pictures ({}) in the directory".format(
            directory, ", ".join(IMAGE_EXTENSIONS)))
    pictures, unreadable = [], []
    for name in names:
        if len(pictures) == limit:
            break
        path = os.path.join(directory, name)
        try:
            with Image.open(path) as picture:
                pictures.append((name, np.asarray(picture.convert("RGB"))))
        except (OSError, ValueError, SyntaxError):
            unreadable.append(name)
    if not pictures:
        raise EdgeAttnError("--calib {}: none of its {} picture file(s) could be read (first: {})".format(
            directory, len(names), unreadable[0]))
    if unreadable:
        warn("--calib {}: skipped {} unreadable file(s): {}".format(directory, len(unreadable),
                                                                    ", ".join(unreadable[:3])))
    return pictures


def calibration_inputs(source, chw, size=DEFAULT_SIZE, seed=0, warn=None):
    """``(array N x C x H x W float32, description)`` for a model input of ``chw`` = (channels, height, width)."""
    warn = warn or (lambda message: None)
    if size is None or int(size) < 1:
        raise EdgeAttnError("--calib-size must be a positive number, got {}".format(size))
    size = int(size)
    channels, height, width = chw
    if source is None:
        raise EdgeAttnError("give calibration data: --calib " + SOURCES_HELP)
    if source == "random":
        warn("--calib random: standard-normal tensors are not representative of real inputs; the INT8 ranges "
             "(and so the accuracy) will differ from what pictures give. Use --calib DIR for a real model.")
        batch = np.random.default_rng(seed).standard_normal((size, channels, height, width)).astype(np.float32)
        return batch, {"source": "random", "seed": int(seed), "count": size, "distribution": "standard normal"}
    if channels != 3:
        raise EdgeAttnError("--calib {}: pictures give 3 channels (RGB) but the model takes {}".format(
            source, channels))
    from ..compare.inputs import CROP_FRACTION, preprocess, sample_pictures

    if source == "skimage":
        pictures = sample_pictures()[:size]
        if len(pictures) < size:
            warn("--calib skimage has {} pictures; calibrating on those (not --calib-size {})".format(
                len(pictures), size))
    else:
        if not os.path.isdir(source):
            raise EdgeAttnError("--calib {}: not a directory (give {})".format(source, SOURCES_HELP))
        pictures = _pictures_in(source, size, warn)
    batch = np.stack([preprocess(array, height, width) for _, array in pictures])
    return batch, {"source": "skimage" if source == "skimage" else "images",
                   "directory": None if source == "skimage" else os.path.abspath(source),
                   "count": len(pictures), "pictures": [name for name, _ in pictures],
                   "preprocessing": "shorter side to size/{:g} (bicubic), centre crop, ImageNet mean/std".format(
                       CROP_FRACTION)}
