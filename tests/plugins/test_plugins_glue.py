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


def header_sets(applies):
    """The test runs against these header sets only (``applies(major)``), instead of skipping the others: under
    CI=true every skip but a GPU test's fails the run."""
    labels = [entry[0] for entry in TRT_HEADER_SETS if applies(int(entry[0].split(".")[0]))]
    return pytest.mark.parametrize("trt", labels, indirect=True, ids=["trt" + label for label in labels])


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
                       [kernels_build["library"], "-Wl,-rpath," + library_dir, "-ldl"])
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


def scenario_workspaces(kernels_build):
    """The C ABI's workspace size for each scenario's shapes (glue_harness.cpp) at batch 3."""
    kernels = kernels_abi.KernelsLibrary(kernels_build["library"])
    return {
        "EdgeAttnBlockifyAttention": kernels.blockify_attention_workspace_size(3, 56, 56, 64, 2, 7),
        "EdgeAttnEfficientAttention": kernels.efficient_attention_workspace_size(3, 3136, 64, 2),
        "EdgeAttnLiteMLA": kernels.lite_mla_workspace_size(3, 96, 14, 14, 16, "quadratic_taylor"),
        "EdgeAttnSoftKernelAttention": kernels.soft_kernel_attention_workspace_size(3, 3136, 49, 64, 2),
    }


def test_shapes_are_validated_and_workspace_matches_the_c_abi(trt, harness_output, kernels_build):
    expected_workspace = scenario_workspaces(kernels_build)
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



# The attributes glue_harness.cpp's scenarios() gives each op (the rest take their schema defaults).
SCENARIO_ATTRIBUTES = {
    "EdgeAttnBlockifyAttention": {"num_heads": 2, "height": 56, "width": 56, "window_size": 7, "scale": 0.0,
                                  "has_lepe": 1, "padding": "masked"},
    "EdgeAttnEfficientAttention": {"num_heads": 2},
    "EdgeAttnLiteMLA": {"head_dim": 16, "kernel": "quadratic_taylor", "eps": 1e-6, "qt_alpha": [0.5, 0.25],
                        "qt_beta": [0.5, 0.25], "qt_gamma": [0.5, 0.25]},
    "EdgeAttnSoftKernelAttention": {"num_heads": 2, "newton_iters": 12},
}


def _expected_launch_arguments(op_type, attributes):
    """The C ABI arguments (edgeattn/kernels.h) the glue must pass for these attributes, filled from the schema's
    defaults: an independent statement of the attribute -> launcher mapping."""
    values = {a["name"]: a.get("default") for a in schemas()[op_type]["attributes"]}
    values.update(attributes)
    if op_type == "EdgeAttnBlockifyAttention":
        return {"num_heads": values["num_heads"], "height": values["height"], "width": values["width"],
                "window_size": values["window_size"], "scale": values["scale"],
                "padding": kernels_abi.PADDINGS[values["padding"]], "lepe": values["has_lepe"] == 1}
    if op_type == "EdgeAttnEfficientAttention":
        return {"num_heads": values["num_heads"]}
    if op_type == "EdgeAttnLiteMLA":
        expected = {"head_dim": values["head_dim"], "kernel": kernels_abi.LITE_MLA_KERNELS[values["kernel"]],
                    "eps": values["eps"]}
        if values["kernel"] == "quadratic_taylor":  # the coefficients are read only for this kernel
            expected.update(qt_count=len(values["qt_alpha"]), qt_alpha=values["qt_alpha"], qt_beta=values["qt_beta"],
                            qt_gamma=values["qt_gamma"])
        return expected
    assert op_type == "EdgeAttnSoftKernelAttention", op_type
    return {"num_heads": values["num_heads"], "newton_iters": values["newton_iters"],
            "symmetric_norm": values["symmetric_norm"]}


def _assert_arguments(op_type, label, got, expected):
    for name, value in expected.items():
        if isinstance(value, float) or (isinstance(value, list) and value and isinstance(value[0], float)):
            assert got[name] == pytest.approx(value, rel=1e-6, abs=0.0), (op_type, label, name, got)
        else:
            assert got[name] == value, (op_type, label, name, got)


def test_enqueue_hands_the_kernels_the_attributes_and_schema_defaults(harness_output):
    """The harness replaces the C ABI launchers by spies and enqueues a non-empty FP32 batch: the glue must pass
    every attribute (padding, kernel, eps, ...) through unchanged, and the schema defaults where a node gives only
    the required attributes."""
    for op_type, scenario in harness_output["scenarios"].items():
        for label, attributes in (("launch", SCENARIO_ATTRIBUTES[op_type]),
                                  ("launch_required_only", {a["name"]: SCENARIO_ATTRIBUTES[op_type][a["name"]]
                                                            for a in schemas()[op_type]["attributes"]
                                                            if a.get("required")})):
            launch = scenario["extra"][label]
            assert launch["created"], (op_type, label, launch.get("messages"))
            assert launch["status"] == 0 and launch["messages"] == [], (op_type, label, launch)
            assert launch["args"]["batch"] == 3 and launch["args"]["dtype"] == kernels_abi.DTYPES["float32"], op_type
            _assert_arguments(op_type, label, launch["args"], _expected_launch_arguments(op_type, attributes))


def test_a_failed_kernel_launch_fails_enqueue_and_says_why(harness_output):
    for op_type, scenario in harness_output["scenarios"].items():
        for label in ("launch", "launch_required_only"):
            launch = scenario["extra"][label]
            assert launch["failed_called"], (op_type, label)
            assert launch["failed_status"] != 0, (op_type, label)  # enqueue: 0 for success, else an error
            assert len(launch["failed_messages"]) == 1, (op_type, label, launch["failed_messages"])
            message = launch["failed_messages"][0]
            assert op_type in message and "invalid argument" in message, message


def test_output_type_follows_fp32_inputs(harness_output):
    # dtype_same_as: q in every schema: FP32 in, FP32 out (FP16 is covered by test_output_shapes_and_types...).
    for op_type, scenario in harness_output["scenarios"].items():
        assert scenario["extra"]["fp32_output_type_status"] == 0, op_type
        assert scenario["extra"]["fp32_output_is_float"], op_type


@header_sets(lambda major: major >= 10)  # IPluginV2DynamicExt::getWorkspaceSize receives concrete shapes
def test_workspace_is_sized_for_the_profile_maximum(trt, harness_output, kernels_build):
    """IPluginV3OneBuild::getWorkspaceSize must cover every shape of the profile: with a dynamic batch (desc -1,
    min 1, opt 2, max 3) it is the workspace of the maximum."""
    expected = scenario_workspaces(kernels_build)
    for op_type, scenario in harness_output["scenarios"].items():
        assert scenario["extra"]["workspace_dynamic_batch"] == expected[op_type], op_type


def test_plugins_and_their_clones_report_the_schema_identity(trt, harness_output):
    """getPluginVersion of the plugin (not only the creator) is the schema version, and clone() keeps name, version,
    namespace (TensorRT 8 sets it on the plugin with setPluginNamespace; the harness uses "custom_namespace") and
    every attribute."""
    ops = schemas()
    namespace = "edgeattn" if trt["major"] >= 10 else "custom_namespace"
    for op_type, scenario in harness_output["scenarios"].items():
        assert scenario["plugin_version"] == str(ops[op_type]["version"]), op_type
        clone = scenario["extra"]["clone"]
        assert (clone["name"], clone["version"], clone["namespace"]) == (
            op_type, str(ops[op_type]["version"]), namespace), op_type
        assert clone["same_attributes"], op_type


# configurePlugin's verdict on shapes beyond the scenarios (glue_harness.cpp shapeCases()), from the schemas'
# inputs and shape_constraints: landmarks (B, M, C) with q's B and C and any M; q, k, v of one shape; qkv.shape[1]
# a multiple of 3 * head_dim with 1 or G coefficient sets; C % num_heads == 0.
SHAPE_VERDICTS = {
    "EdgeAttnSoftKernelAttention": {"landmarks_batch_differs": False, "landmarks_channels_differ": False,
                                    "other_landmark_count": True},
    "EdgeAttnEfficientAttention": {"k_tokens_differ": False, "v_batch_differs": False},
    "EdgeAttnLiteMLA": {"one_coefficient_set_two_groups": True, "one_coefficient_set_three_groups": True,
                        "channels_not_multiple_of_3_head_dim": False},
    "EdgeAttnBlockifyAttention": {"channels_not_multiple_of_heads": False, "channels_multiple_of_heads": True},
}


def test_configure_follows_the_schema_shape_constraints(harness_output):
    for op_type, scenario in harness_output["scenarios"].items():
        cases = scenario["shape_cases"]
        assert set(cases) == set(SHAPE_VERDICTS[op_type]), op_type
        for label, accepted in SHAPE_VERDICTS[op_type].items():
            case = cases[label]
            assert case["created"], (op_type, label, case["messages"])
            assert case["accepted"] is accepted, (op_type, label, case["messages"])
            if not accepted:
                assert case["messages"] and op_type in case["messages"][0], (op_type, label)


@header_sets(lambda major: major >= 10)  # PluginFieldType::kINT64 exists from TensorRT 10
def test_int64_fields_are_refused_when_they_do_not_fit_32_bits(trt, harness_output):
    for op_type, scenario in harness_output["scenarios"].items():
        rejections = scenario["rejections"]
        assert rejections["int64_in_range"]["created"], (op_type, rejections["int64_in_range"]["messages"])
        assert not rejections["int64_out_of_range"]["created"], op_type
        assert "must be a 32-bit integer" in rejections["int64_out_of_range"]["messages"][0], op_type


@header_sets(lambda major: major < 10)  # IPluginV3 has no byte serialization
def test_deserialization_refuses_trailing_bytes(trt, harness_output):
    """A serialized plugin is exactly what serialize() wrote: one more byte means another format or a corrupt
    engine, and deserializePlugin must refuse it (TensorRT 8; TensorRT 10 deserializes through createPlugin)."""
    for op_type, scenario in harness_output["scenarios"].items():
        assert scenario["trailing_rejected"], op_type
        assert "trailing bytes" in scenario["trailing_messages"][0], op_type


# The kernel paths of edgeattn/kernels.h as TensorRT tactics: scalar everywhere, the tensor-core kernels (FP16 I/O
# only) where the device and the library's code for it are sm_80+ (plugins/README.md, "Kernel path by timing").
SCALAR, TENSOR_CORE = kernels_abi.KERNEL_PATHS["scalar"], kernels_abi.KERNEL_PATHS["tensor_core"]
# blockify's one-warp kernel beside the pipelined one, SOFT's Newton-Raphson one block per problem beside its GEMM tiles
TENSOR_CORE_WARP = kernels_abi.KERNEL_PATHS["tensor_core_warp"]
TWO_TENSOR_CORE_PATHS = ("EdgeAttnBlockifyAttention", "EdgeAttnSoftKernelAttention")
EXPECTED_TACTICS = {"sm_53": [SCALAR], "sm_72": [SCALAR], "sm_75": [SCALAR], "sm_80": [SCALAR, TENSOR_CORE],
                    "sm_87": [SCALAR, TENSOR_CORE], "sm_87_code_72": [SCALAR], "sm_90": [SCALAR, TENSOR_CORE]}


def expected_tactics(op_type, device):
    paths = EXPECTED_TACTICS[device]
    return paths + [TENSOR_CORE_WARP] if op_type in TWO_TENSOR_CORE_PATHS and TENSOR_CORE in paths else paths


def test_enqueue_without_a_tactic_leaves_the_path_to_the_kernels_default(harness_output):
    """TensorRT 8.x has no plugin tactics and TensorRT >= 10 without setTactic runs tactic 0: the launcher is called
    with the thread's path unset (-1), so the kernels' default table (AUTO) or the process-wide setting decides."""
    for op_type, scenario in harness_output["scenarios"].items():
        for label in ("launch", "launch_required_only"):
            assert scenario["extra"][label]["args"]["thread_path"] == kernels_abi.KERNEL_PATH_INHERIT, (op_type, label)


@header_sets(lambda major: major >= 10)  # IPluginV3OneBuild::getValidTactics / IPluginV3OneRuntime::setTactic
def test_plugins_offer_the_kernel_paths_the_device_runs_as_tactics(trt, harness_output):
    for op_type, scenario in harness_output["scenarios"].items():
        tactics = scenario["tactics"]
        assert set(tactics["offered"]) == set(EXPECTED_TACTICS), op_type
        for device in EXPECTED_TACTICS:
            expected = expected_tactics(op_type, device)
            fp16, fp32 = tactics["offered"][device]["fp16"], tactics["offered"][device]["fp32"]
            assert fp16["configure"] == 0 and fp16["status"] == 0 and fp16["tactics"] == expected, (op_type, device)
            assert fp32["configure"] == 0 and fp32["status"] == 0 and fp32["tactics"] == [SCALAR], (op_type, device)
        assert 0 not in sum((entry["fp16"]["tactics"] for entry in tactics["offered"].values()), [])  # 0 is reserved
        assert tactics["wrong_buffer_status"] != 0 and op_type in tactics["wrong_buffer_messages"][0], op_type
        # no device to query (this machine): no custom tactics, one logged reason, and TensorRT keeps tactic 0
        assert tactics["no_device_count"] == 0, op_type
        assert len(tactics["no_device_messages"]) == 1 and "cannot query the device" in tactics["no_device_messages"][0]


@header_sets(lambda major: major >= 10)
def test_set_tactic_picks_the_kernel_path_of_each_launch(trt, harness_output):
    """setTactic(path) makes the launcher run under that path (the thread setting, restored after the launch);
    tactic 0 leaves it to the default; unknown tactics are refused with a reason and change nothing."""
    for op_type, scenario in harness_output["scenarios"].items():
        set_tactic = scenario["tactics"]["set_tactic"]
        for tactic, expected_path in (("0", -1), (str(SCALAR), SCALAR), (str(TENSOR_CORE), TENSOR_CORE)):
            entry = set_tactic[tactic]
            assert entry["status"] == 0 and entry["messages"] == [], (op_type, tactic, entry)
            assert entry["enqueue"]["status"] == 0 and entry["enqueue"]["args"]["dtype"] == 1, (op_type, tactic)
            assert entry["enqueue"]["args"]["thread_path"] == expected_path, (op_type, tactic, entry)
            assert entry["enqueue"]["thread_path_after"] == -1, (op_type, tactic)
        for tactic in ("7", "-1"):
            entry = set_tactic[tactic]
            assert entry["status"] != 0 and "tactic {}".format(tactic) in entry["messages"][0], (op_type, tactic)
            assert entry["enqueue"]["args"]["thread_path"] == -1, (op_type, tactic)
        over = scenario["tactics"]["over_application_scalar"]
        assert over["args"]["thread_path"] == TENSOR_CORE and over["thread_path_after"] == SCALAR, op_type


@header_sets(lambda major: major >= 10)
def test_the_tactic_survives_clone_attach_and_the_engine_round_trip(trt, harness_output):
    """clone() and attachToContext() keep the tactic; a plugin recreated from its serialized fields (an engine's
    deserialization) runs the default until the runtime hands it the recorded tactic through setTactic, then that."""
    for op_type, scenario in harness_output["scenarios"].items():
        tactics = scenario["tactics"]
        for label in ("clone", "attached", "restored"):
            assert tactics[label]["status"] == 0 and tactics[label]["args"]["thread_path"] == TENSOR_CORE, (
                op_type, label, tactics[label])
        assert tactics["restored_set_tactic"] == 0, op_type
        assert tactics["restored_default"]["args"]["thread_path"] == -1, op_type
