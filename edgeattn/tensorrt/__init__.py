"""What is true of a TensorRT engine at run time, below both ``edgeattn build`` (:mod:`edgeattn.engine`) and
``edgeattn bench`` (:mod:`edgeattn.bench`):

* :mod:`.manifest`: the manifest beside every engine and its checks (the engine's sha256, host code embedded in a
  version-compatible engine, TensorRT version and GPU compatibility, the batch against the profile);
* :mod:`.plugin_library`: which plugin library a build or a run uses, refused by sha256 before it is loaded;
* :mod:`.api`: the thin layer over TensorRT's Python API (one logger, plugin registration,
  :func:`~.api.deserialize_engine`);
* :mod:`.cuda`: device buffers, one stream, events and CUDA graphs over the CUDA primary context.

Nothing here imports ``tensorrt``, ``torch`` or cuda-python at import time, and nothing imports ``engine``,
``bench`` or the commands above them (``tests/test_architecture.py`` checks the layering).
"""
