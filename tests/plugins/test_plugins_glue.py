"""The TensorRT plugin glue, compiled against real public TensorRT headers kept OUTSIDE the repository.

Header sets (directories holding NvInferVersion.h), by default <shared>/third_party/tensorrt-headers/<version>/include
next to the repository (EDGEATTN_SHARED_DIR moves <shared>), each overridable:
    EDGEATTN_TRT_INCLUDE_8_0    TensorRT 8.0 (JetPack 4.6)       -> IPluginV2DynamicExt
    EDGEATTN_TRT_INCLUDE_8_2    TensorRT 8.2 (JetPack 4.6.1+)    -> IPluginV2DynamicExt
    EDGEATTN_TRT_INCLUDE_10_3   TensorRT 10.3 (JetPack 6.1/6.2)  -> IPluginV3
    EDGEATTN_TRT_INCLUDE_11_1   TensorRT 11.1 (desktop; the API TensorRT-RTX 1.7 loads) -> IPluginV3
(Apache-2.0 headers from `git archive` of the release/8.0, release/8.2, release/10.3 branches and the 11.1 tag of
github.com/NVIDIA/TensorRT; never the NVIDIA-proprietary 8.4-8.6 ones). A missing set skips its version.

For each version: every glue translation unit compiles with -Wall -Wextra -Werror (objects only: libnvinfer is not
needed; compiled once and cached by content hash, see plugin_test_utils.glue_build); a host harness
(glue_harness.cpp) drives the real creators and plugins through the TensorRT interfaces with a fake IExprBuilder
and checks them against the op schemas; the statically registering library is linked against a fake libnvinfer
(fake_nvinfer.cpp) and loaded with ctypes to see what it registers; for TensorRT >= 8.6 the loadLibrary variant is
linked without libnvinfer and its getCreators/setLoggerFinder entry points are called the way
IPluginRegistry::loadLibrary does. No GPU is used.
"""
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from edgeattn._subprocess import run_command
from edgeattn.plugins import kernels_abi
from plugin_test_utils import (COMPILE_TIMEOUT_S, PLUGINS_DIR, REPO_ROOT, TRT_HEADER_SETS, cuda_include_dir,
                               find_cxx, find_nvcc, glue_build, glue_objects, header_version,
                               link_dynamic_plugin_library, trt_include_dir)

FIELD_TYPES = {"int": 5, "float": 1, "string": 6, "floats": 1, "ints": 5}  # nvinfer1::PluginFieldType values


def schemas():
    result = {}
    directory = os.path.join(REPO_ROOT, "export", "schemas")
    for name in sorted(os.listdir(directory)):
        if name.endswith(".yaml"):
            with open(os.path.join(directory, name)) as handle:
                data = yaml.safe_load(handle)
            result[data["op_type"]] = data
    return result


# One pytest-xdist worker per header set (--dist loadgroup), so each set's glue is compiled once; the TensorRT-RTX
# registry test, which links the 11.1 build, joins the 11.1 group.
@pytest.fixture(scope="module", ids=lambda label: "trt" + label,
                params=[pytest.param(entry[0], marks=pytest.mark.xdist_group("glue-trt" + entry[0]))
                        for entry in TRT_HEADER_SETS])
def trt(request, tmp_path_factory):
    label = request.param
    include, origin = trt_include_dir(label)
    if not os.path.isfile(os.path.join(include, "NvInferVersion.h")):
        if origin != "default":
            pytest.fail("{}={} has no NvInferVersion.h".format(origin, include))
        pytest.skip("no TensorRT {} headers at {} (set EDGEATTN_TRT_INCLUDE_{} or EDGEATTN_SHARED_DIR)".format(
            label, include, label.replace(".", "_")))
    version = header_version(include)
    assert version.startswith(label + "."), "{} points at TensorRT {} headers, not {}".format(include, version, label)
    cxx = find_cxx()
    if cxx is None:
        pytest.skip("no C++ compiler (c++/g++/clang++) on PATH")
    nvcc = find_nvcc()
    cuda_include = cuda_include_dir(nvcc) if nvcc else None
    if cuda_include is None:
        pytest.skip("CUDA headers (cuda_runtime_api.h, included by NvInfer.h) not found")
    major, minor = (int(part) for part in version.split(".")[:2])
    build = glue_build(label, include, cxx, cuda_include)
    objects = build["objects"]
    return {"label": label, "version": version, "include": include, "major": major, "minor": minor,
            "work": str(tmp_path_factory.mktemp("glue-trt" + label)), "cxx": cxx, "flags": build["flags"],
            "compiled": build["results"], "objects": objects, "cached": build["cached"],
            "variants": sorted(name[len("registration_"):-2] for name in objects if name.startswith("registration_")),
            "glue_objects": glue_objects(objects)}


def test_glue_compiles_without_warnings(trt):
    failures = {obj: result.output[-3000:] for obj, result in trt["compiled"].items() if result.returncode != 0}
    assert not failures, "glue does not compile against TensorRT {}:\n{}".format(
        trt["version"], "\n".join("{}:\n{}".format(k, v) for k, v in failures.items()))
    print("compiled the plugin glue against TensorRT {} headers ({} objects, registration variants {})".format(
        trt["version"], len(trt["compiled"]), ", ".join(trt["variants"])))


def _link(trt, output, objects, extra):
    result = run_command([trt["cxx"], "-o", output] + objects + extra, timeout=COMPILE_TIMEOUT_S)
    assert result.returncode == 0, "link of {} failed:\n{}".format(output, result.output[-3000:])
    return output


@pytest.fixture(scope="module")
def harness_output(trt, kernels_build):
    test_glue_compiles_without_warnings(trt)
    library_dir = os.path.dirname(kernels_build["library"])
    executable = _link(trt, os.path.join(trt["work"], "glue_harness"),
                       trt["glue_objects"] + [trt["objects"]["registration_NONE.o"], trt["objects"]["glue_harness.o"]],
                       [kernels_build["library"], "-Wl,-rpath," + library_dir])
    result = run_command([executable], timeout=120)
    assert result.returncode == 0, result.output[-3000:]
    return json.loads(result.stdout)


def test_harness_reports_the_compiled_interface(trt, harness_output):
    assert harness_output["trt_version"] == ".".join(trt["version"].split(".")[:3])
    expected = "IPluginV3" if trt["major"] >= 10 else "IPluginV2DynamicExt"
    assert harness_output["interface"] == expected
    assert harness_output["unexpected_messages"] == []


def test_creators_expose_exactly_the_schema_fields(trt, harness_output):
    ops = schemas()
    creators = {c["name"]: c for c in harness_output["creators"]}
    assert set(creators) == set(ops)
    for op_type, schema in ops.items():
        creator = creators[op_type]
        assert (creator["version"], creator["namespace"]) == (str(schema["version"]), schema["namespace"])
        assert [field[0] for field in creator["fields"]] == [a["name"] for a in schema["attributes"]]
        assert [field[1] for field in creator["fields"]] == [FIELD_TYPES[a["type"]] for a in schema["attributes"]]
        if trt["major"] >= 10:
            assert creator["interface_kind"] == "PLUGIN CREATOR_V3ONE"


def test_plugins_round_trip_their_attributes(trt, harness_output):
    for op_type, scenario in harness_output["scenarios"].items():
        assert scenario["created"], (op_type, scenario.get("messages"))
        assert (scenario["plugin_name"], scenario["plugin_namespace"]) == (op_type, "edgeattn")
        assert scenario["round_trip"] == scenario["original"], op_type
        if trt["major"] >= 10:
            assert [f[0] for f in scenario["serialized_fields"]] == [
                a["name"] for a in schemas()[op_type]["attributes"]]
        else:
            assert scenario["reserialized_identical"] and scenario["corrupt_rejected"] and scenario["truncated_rejected"]
            assert "bad magic" in scenario["corrupt_messages"][0]
    assert 'padding="masked"' in harness_output["scenarios"]["EdgeAttnBlockifyAttention"]["original"]
    assert "qt_alpha=[0.5, 0.25]" in harness_output["scenarios"]["EdgeAttnLiteMLA"]["original"]
    assert "newton_iters=12, symmetric_norm=1" in harness_output["scenarios"]["EdgeAttnSoftKernelAttention"]["original"]


def test_output_shapes_and_types_follow_the_contract(harness_output):
    expected = {
        "EdgeAttnBlockifyAttention": ["?", 3136, 64],
        "EdgeAttnEfficientAttention": ["?", 3136, 64],
        "EdgeAttnLiteMLA": ["?", 32, 14, 14],  # (B, G*3*d, H, W) -> (B, G*d, H, W)
        "EdgeAttnSoftKernelAttention": ["?", 3136, 64],
    }
    for op_type, scenario in harness_output["scenarios"].items():
        assert scenario["output_shape_status"] == 0
        assert scenario["output_dims"] == expected[op_type], op_type
        assert scenario["output_batch_is_input_batch"], op_type  # the symbolic batch passes through untouched
        assert scenario["output_shape_wrong_input_count"] == -1, op_type
        assert scenario["output_type_status"] == 0 and scenario["output_type_is_half"], op_type


def test_format_combinations_are_linear_fp32_or_fp16_of_one_type(harness_output):
    for op_type, scenario in harness_output["scenarios"].items():
        formats = scenario["formats"]
        count = len(formats["fp32"])
        assert formats["fp32"] == [True] * count, op_type
        assert formats["fp16"] == [True] * count, op_type
        assert formats["mixed"] == [True] + [False] * (count - 1), op_type
        assert formats["int8"] == [False] * count, op_type
        assert formats["chw2"] == [False] * count, op_type


def test_shapes_are_validated_and_workspace_matches_the_c_abi(trt, harness_output, kernels_build):
    kernels = kernels_abi.KernelsLibrary(kernels_build["library"])
    expected_workspace = {
        "EdgeAttnBlockifyAttention": kernels.blockify_attention_workspace_size(3, 56, 56, 64, 2, 7),
        "EdgeAttnEfficientAttention": kernels.efficient_attention_workspace_size(3, 3136, 64, 2),
        "EdgeAttnLiteMLA": kernels.lite_mla_workspace_size(3, 96, 14, 14, 16, "quadratic_taylor"),
        "EdgeAttnSoftKernelAttention": kernels.soft_kernel_attention_workspace_size(3, 3136, 49, 64, 2),
    }
    for op_type, scenario in harness_output["scenarios"].items():
        assert scenario["configure_good"] == 0, op_type
        assert scenario["configure_bad"] == -1, op_type
        assert op_type in scenario["configure_bad_messages"][0]
        assert scenario["workspace"] == expected_workspace[op_type], op_type
        assert scenario["shape_change_empty_batch"] == 0, op_type
        assert scenario["enqueue_empty_batch"] == 0, (op_type, scenario["enqueue_empty_batch_messages"])
        assert scenario["attach_clones"], op_type
        if trt["major"] < 10:
            assert scenario["enqueue_bad_shapes"] == -1, op_type
    assert expected_workspace["EdgeAttnEfficientAttention"] > 0
    assert "expected 3136, got 3000" in harness_output["scenarios"]["EdgeAttnBlockifyAttention"]["configure_bad_messages"][0]


def test_creators_reject_bad_fields_loudly(harness_output):
    for op_type, scenario in harness_output["scenarios"].items():
        rejections = scenario["rejections"]
        for case in ("unknown_field", "missing_required", "wrong_type"):
            assert not rejections[case]["created"], (op_type, case)
            assert rejections[case]["messages"] and op_type in rejections[case]["messages"][0], (op_type, case)
        has_string = any(a["type"] == "string" for a in schemas()[op_type]["attributes"])
        assert rejections["bad_string_value"]["created"] is (not has_string), op_type
    messages = harness_output["scenarios"]["EdgeAttnBlockifyAttention"]["rejections"]
    assert 'unknown field "not_in_schema"' in messages["unknown_field"]["messages"][0]
    assert "required field num_heads is missing" in messages["missing_required"]["messages"][0]
    assert 'padding="bogus" is not one of {none, zeros, masked}' in messages["bad_string_value"]["messages"][0]


LOAD_STATIC = """
import ctypes, json, sys
fake = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
plugins = ctypes.CDLL(sys.argv[2], mode=ctypes.RTLD_GLOBAL)
fake.fake_registry_dump.restype = ctypes.c_char_p
plugins.edgeattn_plugins_build_info.restype = ctypes.c_char_p
out = json.loads(fake.fake_registry_dump().decode())
out["build_info"] = plugins.edgeattn_plugins_build_info().decode()
sys.path.insert(0, sys.argv[3])
import edgeattn.plugins as loader
loaded = loader.load_plugin_library(sys.argv[2])
out["loader"] = {"creators": loaded.creators, "source": loaded.creators_source, "build_info": loaded.build_info}
print(json.dumps(out))
"""


def test_static_library_registers_every_creator_under_edgeattn(trt, kernels_build):
    test_glue_compiles_without_warnings(trt)
    work = trt["work"]
    fake_dir = os.path.join(work, "fake_nvinfer")
    os.makedirs(fake_dir, exist_ok=True)
    fake = os.path.join(fake_dir, "libnvinfer.so")
    _link(trt, fake, [trt["objects"]["fake_nvinfer.o"]], ["-shared"])
    library = _link(trt, os.path.join(work, "libedgeattn_plugins.so"),
                    trt["glue_objects"] + [trt["objects"]["registration_STATIC.o"]],
                    ["-shared", kernels_build["library"], "-L" + fake_dir, "-lnvinfer",
                     "-Wl,--version-script=" + os.path.join(PLUGINS_DIR, "exports", "edgeattn_plugins.map"),
                     "-Wl,--no-undefined", "-Wl,-rpath," + os.path.dirname(kernels_build["library"])])
    exported = run_command(["nm", "-D", "--defined-only", library], timeout=60, check=True).stdout
    assert re.findall(r" T (\w+)", exported) == ["edgeattn_plugins_build_info"]
    env = dict(os.environ, LD_LIBRARY_PATH=fake_dir)
    env.pop("EDGEATTN_PLUGIN_LIB", None)
    result = subprocess.run([sys.executable, "-c", LOAD_STATIC, fake, library, REPO_ROOT], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    registered = {(r["name"], r["version"], r["registered_namespace"], r["creator_namespace"])
                  for r in report["registrations"]}
    expected = {(op, str(s["version"]), "edgeattn", "edgeattn") for op, s in schemas().items()}
    assert registered == expected
    assert len(report["registrations"]) == len(expected)
    assert report["messages"] == []
    assert "registration static" in report["build_info"]
    assert "TensorRT {}".format(".".join(trt["version"].split(".")[:3])) in report["build_info"]
    assert report["loader"]["source"] in ("schemas", "tensorrt")
    assert report["loader"]["build_info"] == report["build_info"]


def test_dynamic_library_exports_only_the_load_library_entry_points(trt, kernels_build):
    if (trt["major"], trt["minor"]) < (8, 6):
        # No IPluginRegistry::loadLibrary before 8.6: the loadLibrary variant must refuse to build, by name.
        refused = run_command([trt["cxx"]] + trt["flags"] + ["-DEDGEATTN_REGISTRATION_DYNAMIC", "-fsyntax-only",
                              os.path.join(PLUGINS_DIR, "common", "pluginRegistration.cpp")], timeout=COMPILE_TIMEOUT_S)
        assert refused.returncode != 0
        assert "libedgeattn_plugins_dynamic needs TensorRT >= 8.6" in refused.output
        return
    test_glue_compiles_without_warnings(trt)
    work = trt["work"]
    library = link_dynamic_plugin_library(trt["cxx"], trt["objects"], trt["major"], kernels_build["library"],
                                          os.path.join(work, "libedgeattn_plugins_dynamic.so"))
    exported = set(re.findall(r" T (\w+)", run_command(["nm", "-D", "--defined-only", library], timeout=60,
                                                         check=True).stdout))
    entry = "getCreators" if trt["major"] >= 10 else "getPluginCreators"
    assert exported == {entry, "setLoggerFinder"}
    needed = run_command(["readelf", "-d", library], timeout=60, check=True).stdout
    assert "libnvinfer" not in needed
    emulator = _link(trt, os.path.join(work, "load_library_emulator"), [trt["objects"]["load_library_emulator.o"]],
                     ["-ldl"])
    result = run_command([emulator, library], timeout=120)
    assert result.returncode == 0, result.output[-3000:]
    creators = json.loads(result.stdout)["creators"]
    ops = schemas()
    assert {c["name"] for c in creators} == set(ops)
    for creator in creators:
        assert creator["creator_namespace"] == "edgeattn"
        assert creator["fields"] == [a["name"] for a in ops[creator["name"]]["attributes"]]


def test_compile_check_uses_headers_outside_the_repository(trt):
    include = os.path.realpath(trt["include"])
    assert not include.startswith(os.path.realpath(REPO_ROOT) + os.sep), "TensorRT headers must stay outside the repo"


def test_no_tensorrt_headers_are_vendored():
    for root, dirs, files in os.walk(REPO_ROOT):
        dirs[:] = [d for d in dirs if d not in (".git", "build", "venv", ".venv")]
        for name in files:
            assert not re.match(r"NvInfer\w*\.h$", name), os.path.join(root, name)

