# nvml.cmake - the NVML shim (build/lib/libnvidia-ml.so.1, docs/nvml.md), its
# session side in `scuda` (src/server/nvml/, globbed into `scuda` by the top
# CMakeLists.txt), and their tests. Included from the top CMakeLists.txt.
#
# nvml.h comes from NVIDIA's nvidia-nvml-dev wheel (scripts/deps.sh installs
# the version codegen/nvml_spec.py pins), or from -DNVML_INCLUDE_DIR=DIR.
# Without it the NVML parts are left out of the build, with a warning.

if(NOT NVML_INCLUDE_DIR OR NOT EXISTS "${NVML_INCLUDE_DIR}/nvml.h")
  # Where pip put the wheel: nvidia/<cuda major>/include/nvml.h in the
  # `nvidia` namespace package.
  execute_process(
    COMMAND python3 -c "import glob, os, nvidia; print(next(os.path.dirname(h) for p in nvidia.__path__ for h in sorted(glob.glob(os.path.join(p, '*', 'include', 'nvml.h')))))"
    OUTPUT_VARIABLE _scuda_nvml_inc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  set(NVML_INCLUDE_DIR "${_scuda_nvml_inc}" CACHE PATH
      "Directory holding nvml.h (pip install nvidia-nvml-dev; see scripts/deps.sh)" FORCE)
endif()

file(GLOB _scuda_nvml_server_src CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/server/nvml/*.c)
if(NOT EXISTS "${NVML_INCLUDE_DIR}/nvml.h")
  message(WARNING "nvml.h not found: building without the NVML shim (libnvidia-ml.so.1). "
                  "Run scripts/deps.sh (it installs the nvidia-nvml-dev wheel) or pass -DNVML_INCLUDE_DIR=DIR.")
  # The top CMakeLists.txt globs these into `scuda`; without nvml.h they
  # cannot compile, and the session then answers NVML ops as unknown.
  if(_scuda_nvml_server_src)
    set_source_files_properties(${_scuda_nvml_server_src} PROPERTIES HEADER_FILE_ONLY TRUE)
  endif()
  return()
endif()
message(STATUS "nvml.h: ${NVML_INCLUDE_DIR}")

# The generated code declares every export under its literal name (nvmlInit
# and nvmlInit_v2 side by side), which needs nvml.h's renaming macros off.
set(NVML_DEFS NVML_NO_UNVERSIONED_FUNC_DEFS=1)
set(NVML_TABLE_SRC ${CMAKE_SOURCE_DIR}/src/common/nvml/nvml_table.gen.c)

# ---- the shim: libnvidia-ml.so.1, next to libcuda.so.1 in build/lib --------
# It talks to the server through the driver shim's connection code
# (src/client/conn.c, resume.c, rpc.c, stats.c, send_queue.c, servers.c, servers_open.c and gdev.c, compiled in
# again: each shim has its own connection, and servers.c keeps the device list over the servers).
file(GLOB _scuda_nvml_client_src CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/client/nvml/*.c)
add_library(scuda_nvml_shim SHARED ${_scuda_nvml_client_src} ${NVML_TABLE_SRC}
            ${CMAKE_SOURCE_DIR}/src/client/conn.c ${CMAKE_SOURCE_DIR}/src/client/resume.c
            ${CMAKE_SOURCE_DIR}/src/client/rpc.c ${CMAKE_SOURCE_DIR}/src/client/stats.c ${CMAKE_SOURCE_DIR}/src/client/send_queue.c
            ${CMAKE_SOURCE_DIR}/src/client/servers.c ${CMAKE_SOURCE_DIR}/src/client/servers_open.c
            ${CMAKE_SOURCE_DIR}/src/client/gdev.c)
target_include_directories(scuda_nvml_shim PRIVATE ${NVML_INCLUDE_DIR})
target_compile_definitions(scuda_nvml_shim PRIVATE ${NVML_DEFS})
target_link_libraries(scuda_nvml_shim PRIVATE scuda_common)
target_compile_options(scuda_nvml_shim PRIVATE ${WARN} -fvisibility=hidden)
target_link_options(scuda_nvml_shim PRIVATE -Wl,-soname,libnvidia-ml.so.1 -Wl,-Bsymbolic -Wl,--no-undefined)
set_target_properties(scuda_nvml_shim PROPERTIES OUTPUT_NAME nvidia-ml PREFIX lib SUFFIX .so.1 NO_SONAME ON)
# `scuda run` finds lib/ through libcuda.so.1; make sure both shims are there.
add_dependencies(scuda scuda_nvml_shim)

# ---- the session side, in `scuda` -------------------------------------------
target_sources(scuda PRIVATE ${NVML_TABLE_SRC})
target_include_directories(scuda PRIVATE ${NVML_INCLUDE_DIR})
target_compile_definitions(scuda PRIVATE ${NVML_DEFS})

# ---- tests ----------------------------------------------------------------------
# Defined at the end of the top directory: the options, enable_testing() and
# tests/e2e's harness come after this file.
function(scuda_nvml_tests)
  if(NOT SCUDA_BUILD_TESTS)
    return()
  endif()
  add_test(NAME codegen/nvml_check COMMAND python3 ${CMAKE_SOURCE_DIR}/codegen/gen_nvml.py --check
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  add_test(NAME nvml/exports
           COMMAND bash -c "nm -D --defined-only \"$0\" | awk '{print $3}' | sort -u > \"$1.have\" && comm -23 <(sort -u \"$2\") \"$1.have\" > \"$1.missing\"; [ ! -s \"$1.missing\" ] || { echo missing:; cat \"$1.missing\"; exit 1; }"
                   $<TARGET_FILE:scuda_nvml_shim> ${CMAKE_BINARY_DIR}/nvml-exports
                   ${CMAKE_SOURCE_DIR}/codegen/libnvml-580-exports.txt)

  # The CPU stand-in NVML (tests/standin/nvml/): fake GPUs, for CI.
  add_library(nvml_standin SHARED ${CMAKE_SOURCE_DIR}/tests/standin/nvml/standin_nvml.c)
  target_include_directories(nvml_standin PRIVATE ${NVML_INCLUDE_DIR})
  target_compile_definitions(nvml_standin PRIVATE ${NVML_DEFS} _GNU_SOURCE)
  target_compile_options(nvml_standin PRIVATE ${WARN})
  set_target_properties(nvml_standin PROPERTIES OUTPUT_NAME nvidia-ml-standin
                        LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib/standin)

  # End to end: the shim, `scuda server` with the CUDA and NVML stand-ins
  # (nvml_servers: a client of two servers).
  if(NOT TARGET e2e_harness)
    message(STATUS "NVML e2e tests skipped: no e2e harness (tests/e2e)")
    return()
  endif()
  foreach(name nvml_remote nvml_passthrough nvml_servers)
    add_executable(e2e_${name} ${CMAKE_SOURCE_DIR}/tests/standin/nvml/${name}.c)
    target_include_directories(e2e_${name} PRIVATE ${NVML_INCLUDE_DIR})
    target_compile_definitions(e2e_${name} PRIVATE ${NVML_DEFS}
                               NVML_STANDIN_LIB="$<TARGET_FILE:nvml_standin>")
    target_link_libraries(e2e_${name} PRIVATE e2e_harness scuda_shim scuda_nvml_shim Threads::Threads)
    target_compile_options(e2e_${name} PRIVATE ${WARN})
    add_dependencies(e2e_${name} nvml_standin)
    if(name STREQUAL "nvml_servers")
      target_compile_definitions(e2e_${name} PRIVATE SCUDA_BIN="$<TARGET_FILE:scuda>") # runs `scuda info`
    endif()
    add_test(NAME e2e/${name} COMMAND e2e_${name})
    set(env "SCUDA_LOG=warn" ${SCUDA_TEST_ENV})
    if(name STREQUAL "nvml_remote" AND SCUDA_TSAN_OPTIONS)
      # Its forked child connects anew, which starts a thread in the child
      # of a threaded process: ThreadSanitizer refuses that by default.
      set(env "SCUDA_LOG=warn" "TSAN_OPTIONS=${SCUDA_TSAN_OPTIONS}:die_after_fork=0")
    endif()
    set_tests_properties(e2e/${name} PROPERTIES TIMEOUT 60 ENVIRONMENT "${env}")
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL scuda_nvml_tests)
