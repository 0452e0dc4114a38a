"""What the stand-ins of TensorRT's Python API share (tests/bench/test_tensorrt_python_smoke.py and
tests/compare/fake_tensorrt.py): the module skeleton our builder reads (version, logger, plugin registry, the flag
enums) and the builder, config and optimization-profile objects, which record what the builder asked for.

Neither stand-in verifies TensorRT: they mirror the documented API surface edgeattn calls
(https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/python-api/), nothing more."""
import types


class Enum(object):
    """A TensorRT enum member: printable by name, convertible to an int (the builder ORs network flags)."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return self.name

    def __int__(self):
        return hash(self.name) % 30


def tensorrt_module(version, creators=()):
    """The ``tensorrt`` module with what every stand-in needs; the caller adds its Network, OnnxParser, Runtime."""
    trt = types.ModuleType("tensorrt")
    trt.__version__ = version
    trt.Logger = type("Logger", (), {"WARNING": 2, "__init__": lambda self, level=None: None})
    trt.init_libnvinfer_plugins = lambda logger, namespace: True
    trt.get_plugin_registry = lambda: types.SimpleNamespace(all_creators=list(creators))
    trt.NetworkDefinitionCreationFlag = types.SimpleNamespace(STRONGLY_TYPED=Enum("STRONGLY_TYPED"))
    trt.BuilderFlag = types.SimpleNamespace(FP16=Enum("FP16"), OBEY_PRECISION_CONSTRAINTS=Enum("OBEY"),
                                            VERSION_COMPATIBLE=Enum("VC"), INT8=Enum("INT8"))
    trt.MemoryPoolType = types.SimpleNamespace(WORKSPACE="workspace")
    return trt


def builder_class(state, network_class, serialize):
    """TensorRT's ``Builder``: ``create_network`` gives a ``network_class()``, ``build_serialized_network`` returns
    ``serialize(network, config)``. The config and profiles record into ``state``: ``profiles`` (name, min, opt,
    max), ``flags`` (their names), ``pool`` (the workspace limit)."""
    state.setdefault("profiles", [])
    state.setdefault("flags", [])
    state.setdefault("pool", None)

    class Profile(object):
        def set_shape(self, name, low, opt, high):
            state["profiles"].append((name, list(low), list(opt), list(high)))

    class Config(object):
        def set_memory_pool_limit(self, pool, size):
            state["pool"] = (pool, size)

        def add_optimization_profile(self, profile):
            pass

        def set_flag(self, flag):
            state["flags"].append(str(flag))

    class Builder(object):
        def __init__(self, logger):
            pass

        def create_network(self, flags):
            return network_class()

        def create_builder_config(self):
            return Config()

        def create_optimization_profile(self):
            return Profile()

        def build_serialized_network(self, network, config):
            return serialize(network, config)

    return Builder
