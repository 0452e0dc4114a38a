"""The inputs both sides of ``edgeattn compare`` run on: seeded standard-normal batches, or real pictures resized,
centre-cropped and normalised as the zoo's models expect."""
import os

import numpy as np

from ..errors import EdgeAttnError, MissingDependencyError

DEFAULT_INPUTS = 8
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CROP_FRACTION = 0.875
#: scikit-image's bundled photographs that load without a download (skimage.data), all turned into RGB
SKIMAGE_PICTURES = ("astronaut", "chelsea", "coffee", "rocket", "stereo_motorcycle", "hubble_deep_field",
                    "immunohistochemistry", "camera")
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".pgm", ".webp", ".tif", ".tiff")


def import_pillow():
    try:
        from PIL import Image
    except ImportError:
        raise MissingDependencyError("Pillow", "reading pictures for --images", "pip install 'edgeattn[images]'")
    return Image


def sample_pictures():
    """``[(name, HxWx3 uint8 array)]``: scikit-image's bundled photographs (no download)."""
    try:
        from skimage import data
    except ImportError:
        raise MissingDependencyError("scikit-image", "the sample pictures (--images skimage)",
                                     "pip install 'edgeattn[images]'")
    pictures = []
    for name in SKIMAGE_PICTURES:
        array = getattr(data, name)()
        if isinstance(array, tuple):  # stereo pairs: the left view
            array = array[0]
        array = np.asarray(array)
        if array.ndim == 2:
            array = np.repeat(array[:, :, None], 3, axis=2)
        pictures.append((name, np.ascontiguousarray(array[:, :, :3]).astype(np.uint8)))
    return pictures


def write_sample_pictures(directory):
    """Write :func:`sample_pictures` as PNG files into ``directory``; returns their paths."""
    Image = import_pillow()
    os.makedirs(directory, exist_ok=True)
    paths = []
    for name, array in sample_pictures():
        path = os.path.join(directory, name + ".png")
        Image.fromarray(array).save(path)
        paths.append(path)
    return paths


def _pictures_in(directory):
    Image = import_pillow()
    if not os.path.isdir(directory):
        raise EdgeAttnError("--images {}: not a directory (or 'skimage' for the bundled sample pictures)".format(
            directory))
    names = sorted(name for name in os.listdir(directory) if name.lower().endswith(IMAGE_EXTENSIONS))
    if not names:
        raise EdgeAttnError("no pictures ({}) in {}".format(", ".join(IMAGE_EXTENSIONS), directory))
    pictures = []
    for name in names:
        path = os.path.join(directory, name)
        try:
            with Image.open(path) as picture:
                pictures.append((name, np.asarray(picture.convert("RGB"))))
        except (OSError, ValueError) as error:
            raise EdgeAttnError("cannot read picture {}: {}".format(path, error))
    return pictures


def preprocess(array, height, width):
    """HxWx3 uint8 -> 3 x height x width float32: shorter side to size/0.875 (bicubic), centre crop, ImageNet
    normalisation."""
    Image = import_pillow()
    picture = Image.fromarray(array)
    scale = max(height / CROP_FRACTION / picture.height, width / CROP_FRACTION / picture.width)
    size = (max(width, int(round(picture.width * scale))), max(height, int(round(picture.height * scale))))
    picture = picture.resize(size, Image.BICUBIC)
    left, top = (size[0] - width) // 2, (size[1] - height) // 2
    picture = picture.crop((left, top, left + width, top + height))
    pixels = np.asarray(picture, dtype=np.float32) / 255.0
    pixels = (pixels - np.array(IMAGENET_MEAN, np.float32)) / np.array(IMAGENET_STD, np.float32)
    return np.ascontiguousarray(pixels.transpose(2, 0, 1))


def make_inputs(chw, count=None, images=None, seed=0):
    """``(array N x C x H x W float32, description)`` for the input size ``chw``."""
    channels, height, width = chw
    if images is not None:
        if channels != 3:
            raise EdgeAttnError("--images needs a 3-channel input; the models take {} channels".format(channels))
        pictures = sample_pictures() if images == "skimage" else _pictures_in(images)
        batch = np.stack([preprocess(array, height, width) for _, array in pictures])
        return batch, {"source": "skimage" if images == "skimage" else "images", "directory": None
                       if images == "skimage" else os.path.abspath(images),
                       "pictures": [name for name, _ in pictures], "count": len(pictures),
                       "preprocessing": "shorter side to size/{:g} (bicubic), centre crop, ImageNet mean/std".format(
                           CROP_FRACTION)}
    count = DEFAULT_INPUTS if count is None else int(count)
    if count < 1:
        raise EdgeAttnError("--inputs must be a positive number, got {}".format(count))
    rng = np.random.default_rng(seed)
    batch = rng.standard_normal((count, channels, height, width)).astype(np.float32)
    return batch, {"source": "random", "seed": int(seed), "count": count, "distribution": "standard normal"}
