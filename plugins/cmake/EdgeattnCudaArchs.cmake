# CUDA architecture selection without CMAKE_CUDA_ARCHITECTURES (CMake 3.10 has none).
#
# edgeattn_resolve_cuda_archs(<out> <requested>)
#   requested "native": compute capabilities of the visible GPUs (try_run of detectCudaArch.cu); without a
#   usable GPU, the Tegra SoC from /proc/device-tree/compatible (tegra210 -> 53 Nano/TX1, tegra186 -> 62 TX2,
#   tegra194 -> 72 Xavier, tegra234 -> 87 Orin); otherwise 87 (Orin), the CI default on x86.
#   Anything else: a ;- or ,-separated list of integers such as "53;72;87".
# edgeattn_gencode_flags(<out> <archs>)   one -gencode=arch=compute_XX,code=sm_XX per arch, plus PTX of the
#   highest arch for forward compatibility on desktop GPUs (Tegra needs the matching SASS, which is there).

function(edgeattn_tegra_arch out)
    set(result "")
    set(compatible_file "/proc/device-tree/compatible")
    if(EXISTS "${compatible_file}")
        file(READ "${compatible_file}" compatible HEX)
        # the file is NUL-separated; compare on hex-decoded text via a plain read as well
        file(STRINGS "${compatible_file}" compatible_text)
        string(REPLACE ";" " " compatible_text "${compatible_text}")
        if(compatible_text MATCHES "tegra234")
            set(result 87)
        elseif(compatible_text MATCHES "tegra194")
            set(result 72)
        elseif(compatible_text MATCHES "tegra186")
            set(result 62)
        elseif(compatible_text MATCHES "tegra210")
            set(result 53)
        endif()
    endif()
    set(${out} "${result}" PARENT_SCOPE)
endfunction()

function(edgeattn_resolve_cuda_archs out requested)
    string(REPLACE "," ";" requested "${requested}")
    if(NOT requested STREQUAL "native")
        foreach(arch ${requested})
            if(NOT arch MATCHES "^[0-9]+$")
                message(FATAL_ERROR "EDGEATTN_CUDA_ARCHS: \"${arch}\" is not a compute capability like 87")
            endif()
        endforeach()
        list(REMOVE_DUPLICATES requested)
        set(${out} "${requested}" PARENT_SCOPE)
        return()
    endif()
    set(detected "")
    if(NOT CMAKE_CROSSCOMPILING)
        try_run(run_result compile_result "${CMAKE_BINARY_DIR}/edgeattn_detect_cuda_arch"
            "${CMAKE_CURRENT_SOURCE_DIR}/cmake/detectCudaArch.cu"
            RUN_OUTPUT_VARIABLE run_output COMPILE_OUTPUT_VARIABLE compile_output)
        if(compile_result AND run_result EQUAL 0 AND run_output MATCHES "^[0-9;]+$")
            set(detected "${run_output}")
            list(REMOVE_DUPLICATES detected)
            message(STATUS "edgeattn: native CUDA archs from the visible GPU(s): ${detected}")
        endif()
    endif()
    if(NOT detected)
        edgeattn_tegra_arch(detected)
        if(detected)
            message(STATUS "edgeattn: no usable CUDA device; Tegra SoC in /proc/device-tree/compatible -> ${detected}")
        endif()
    endif()
    if(NOT detected)
        set(detected 87)
        message(STATUS "edgeattn: no CUDA device and no Tegra SoC found: building for sm_87 (Jetson Orin). "
                       "Set EDGEATTN_CUDA_ARCHS (e.g. 53 for Nano, 72 Xavier, 87 Orin, 86 RTX 30xx).")
    endif()
    set(${out} "${detected}" PARENT_SCOPE)
endfunction()

function(edgeattn_gencode_flags out archs)
    set(flags "")
    set(highest 0)
    foreach(arch ${archs})
        list(APPEND flags "-gencode=arch=compute_${arch},code=sm_${arch}")
        if(arch GREATER highest)
            set(highest ${arch})
        endif()
    endforeach()
    list(APPEND flags "-gencode=arch=compute_${highest},code=compute_${highest}")
    if(NOT CMAKE_CUDA_COMPILER_VERSION VERSION_LESS 11.2)
        list(APPEND flags "--threads=0") # compile the architectures in parallel
    endif()
    set(${out} "${flags}" PARENT_SCOPE)
endfunction()

# edgeattn_tensor_cores(<out> <requested> <archs>): 1 to compile the tensor-core (mma.sync) kernels, else 0.
#   AUTO: 1 when an arch >= 80 is built (a JetPack 4.6 build for 53/62/72 compiles the scalar kernels only, with
#   CUDA 10.2 and C++14); ON: always (their bodies are empty below sm_80 and never launched there); OFF: never.
function(edgeattn_tensor_cores out requested archs)
    string(TOUPPER "${requested}" requested)
    if(requested STREQUAL "OFF")
        set(${out} 0 PARENT_SCOPE)
        return()
    elseif(requested STREQUAL "ON")
        set(${out} 1 PARENT_SCOPE)
        return()
    elseif(NOT requested STREQUAL "AUTO")
        message(FATAL_ERROR "EDGEATTN_TENSOR_CORES: \"${requested}\" is not AUTO, ON or OFF")
    endif()
    set(result 0)
    foreach(arch ${archs})
        if(NOT arch LESS 80)
            set(result 1)
        endif()
    endforeach()
    set(${out} ${result} PARENT_SCOPE)
endfunction()

# CMake >= 3.18 would add its own -arch flags from CMAKE_CUDA_ARCHITECTURES; ours come from EDGEATTN_CUDA_ARCHS.
function(edgeattn_no_cmake_cuda_architectures target)
    if(NOT CMAKE_VERSION VERSION_LESS 3.18)
        set_property(TARGET ${target} PROPERTY CUDA_ARCHITECTURES OFF)
    endif()
endfunction()

# Link the shared CUDA runtime (the one TensorRT uses); fall back to CMake's implicit CUDA libraries.
function(edgeattn_link_cudart target)
    get_filename_component(nvcc_dir "${CMAKE_CUDA_COMPILER}" DIRECTORY)
    find_library(EDGEATTN_CUDART_LIBRARY cudart
        HINTS ${CMAKE_CUDA_IMPLICIT_LINK_DIRECTORIES} "${nvcc_dir}/../lib64" "${nvcc_dir}/../lib")
    if(EDGEATTN_CUDART_LIBRARY)
        target_link_libraries(${target} PRIVATE "${EDGEATTN_CUDART_LIBRARY}")
    else()
        target_link_libraries(${target} PRIVATE ${CMAKE_CUDA_IMPLICIT_LINK_LIBRARIES})
    endif()
endfunction()
