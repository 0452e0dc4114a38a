"""``edgeattn compare``'s inputs (compare/inputs.py): scikit-image's photographs, the centre crop and
ImageNet normalisation, pictures from a directory."""
import json
import os

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("polygraphy")


def test_skimage_pictures_are_real_photographs():
    from edgeattn.compare import SKIMAGE_PICTURES, sample_pictures

    pictures = sample_pictures()
    assert [name for name, _ in pictures] == list(SKIMAGE_PICTURES)
    for _, array in pictures:
        assert array.dtype == np.uint8 and array.ndim == 3 and array.shape[2] == 3 and min(array.shape[:2]) >= 256
        assert array.std() > 10  # a photograph, not a flat image


def test_preprocess_crops_the_centre_and_normalises():
    """A 2:1 picture, red | wide green | blue bands: resizing the short side to 8 / 0.875 (9 px, so 18 px wide)
    and cropping 8 x 8 from the centre keeps only green (with a margin for the bicubic kernel); ImageNet
    normalisation then gives its exact values."""
    from edgeattn.compare import IMAGENET_MEAN, IMAGENET_STD, preprocess

    picture = np.zeros((60, 120, 3), np.uint8)
    picture[:, :10, 0] = 255
    picture[:, 10:110, 1] = 255
    picture[:, 110:, 2] = 255
    out = preprocess(picture, 8, 8)
    assert out.shape == (3, 8, 8) and out.dtype == np.float32
    expected = [(0.0 - IMAGENET_MEAN[0]) / IMAGENET_STD[0], (1.0 - IMAGENET_MEAN[1]) / IMAGENET_STD[1],
                (0.0 - IMAGENET_MEAN[2]) / IMAGENET_STD[2]]
    for channel in range(3):
        assert np.allclose(out[channel], expected[channel], atol=1e-6)


def test_images_directory_and_skimage(invoke, classifier, tmp_path):
    from edgeattn.compare import write_sample_pictures

    pictures = tmp_path / "pictures"
    paths = write_sample_pictures(str(pictures))
    assert len(paths) == 8 and all(os.path.getsize(p) > 1000 for p in paths)
    a, b = classifier("a.onnx"), classifier("b.onnx")
    out = tmp_path / "dir.json"
    invoke(["compare", a, b, "--images", pictures, "--json", out], expect=0)
    from_dir = json.loads(out.read_text())
    assert from_dir["inputs"]["source"] == "images" and from_dir["inputs"]["count"] == 8
    invoke(["compare", a, b, "--images", "skimage", "--json", out], expect=0)
    bundled = json.loads(out.read_text())
    assert bundled["inputs"]["pictures"] == [os.path.basename(p)[:-4] for p in paths]
