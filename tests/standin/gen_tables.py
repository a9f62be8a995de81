#!/usr/bin/env python3
"""Generates tests/standin/standin_tables.h from the CUDA headers.

    python3 tests/standin/gen_tables.py [/usr/local/cuda/include] [exports.txt]

Two tables:
  * si_error_table: every CUresult in cuda.h with its name and a message
    (the real driver's wording for the common codes, otherwise the first
    sentence of the enum's doc comment);
  * si_proc_table: every PFN_<name>_v<version>[_ptds|_ptsz] in
    cudaTypedefs.h, mapped to the exported symbol it stands for
    (k-th version of a name -> name, name_v2, name_v3, ...; a _ptds/_ptsz
    entry -> the symbol of the same version plus the suffix).
The output is committed; rerun when the headers change.
"""
import os
import re
import sys

INC = sys.argv[1] if len(sys.argv) > 1 else "/usr/local/cuda/include"
EXPORTS = sys.argv[2] if len(sys.argv) > 2 else None
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "standin_tables.h")

# cuGetErrorString wording of the real driver for the codes tests meet most.
KNOWN = {
    "CUDA_SUCCESS": "no error",
    "CUDA_ERROR_INVALID_VALUE": "invalid argument",
    "CUDA_ERROR_OUT_OF_MEMORY": "out of memory",
    "CUDA_ERROR_NOT_INITIALIZED": "initialization error",
    "CUDA_ERROR_DEINITIALIZED": "driver shutting down",
    "CUDA_ERROR_PROFILER_DISABLED": "profiler disabled while using external profiling tool",
    "CUDA_ERROR_PROFILER_NOT_INITIALIZED": "profiler not initialized: call cudaProfilerInitialize()",
    "CUDA_ERROR_PROFILER_ALREADY_STARTED": "profiler already started",
    "CUDA_ERROR_PROFILER_ALREADY_STOPPED": "profiler already stopped",
    "CUDA_ERROR_STUB_LIBRARY": "CUDA driver is a stub library",
    "CUDA_ERROR_DEVICE_UNAVAILABLE": "CUDA-capable device(s) is/are busy or unavailable",
    "CUDA_ERROR_NO_DEVICE": "no CUDA-capable device is detected",
    "CUDA_ERROR_INVALID_DEVICE": "invalid device ordinal",
    "CUDA_ERROR_INVALID_IMAGE": "device kernel image is invalid",
    "CUDA_ERROR_INVALID_CONTEXT": "invalid device context",
    "CUDA_ERROR_CONTEXT_ALREADY_CURRENT": "context already current",
    "CUDA_ERROR_MAP_FAILED": "mapping of buffer object failed",
    "CUDA_ERROR_UNMAP_FAILED": "unmapping of buffer object failed",
    "CUDA_ERROR_ARRAY_IS_MAPPED": "array is mapped",
    "CUDA_ERROR_ALREADY_MAPPED": "resource already mapped",
    "CUDA_ERROR_NO_BINARY_FOR_GPU": "no kernel image is available for execution on the device",
    "CUDA_ERROR_ALREADY_ACQUIRED": "resource already acquired",
    "CUDA_ERROR_NOT_MAPPED": "resource not mapped",
    "CUDA_ERROR_NOT_MAPPED_AS_ARRAY": "resource not mapped as array",
    "CUDA_ERROR_NOT_MAPPED_AS_POINTER": "resource not mapped as pointer",
    "CUDA_ERROR_ECC_UNCORRECTABLE": "uncorrectable ECC error encountered",
    "CUDA_ERROR_UNSUPPORTED_LIMIT": "limit is not supported on this architecture",
    "CUDA_ERROR_CONTEXT_ALREADY_IN_USE": "exclusive-thread device already in use by a different thread",
    "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED": "peer access is not supported between these two devices",
    "CUDA_ERROR_INVALID_PTX": "a PTX JIT compilation failed",
    "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT": "invalid OpenGL or DirectX context",
    "CUDA_ERROR_NVLINK_UNCORRECTABLE": "uncorrectable NVLink error detected during the execution",
    "CUDA_ERROR_JIT_COMPILER_NOT_FOUND": "PTX JIT compiler library not found",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "the provided PTX was compiled with an unsupported toolchain.",
    "CUDA_ERROR_JIT_COMPILATION_DISABLED": "PTX JIT compilation was disabled",
    "CUDA_ERROR_INVALID_SOURCE": "device kernel image is invalid",
    "CUDA_ERROR_FILE_NOT_FOUND": "file not found",
    "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND": "shared object symbol not found",
    "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED": "shared object initialization failed",
    "CUDA_ERROR_OPERATING_SYSTEM": "OS call failed or operation not supported on this OS",
    "CUDA_ERROR_INVALID_HANDLE": "invalid resource handle",
    "CUDA_ERROR_ILLEGAL_STATE": "the operation cannot be performed in the present state",
    "CUDA_ERROR_NOT_FOUND": "named symbol not found",
    "CUDA_ERROR_NOT_READY": "device not ready",
    "CUDA_ERROR_ILLEGAL_ADDRESS": "an illegal memory access was encountered",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": "too many resources requested for launch",
    "CUDA_ERROR_LAUNCH_TIMEOUT": "the launch timed out and was terminated",
    "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING": "launch uses incompatible texturing mode",
    "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED": "peer access is already enabled",
    "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED": "peer access has not been enabled",
    "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE": "cannot set while device is active in this process",
    "CUDA_ERROR_CONTEXT_IS_DESTROYED": "context is destroyed",
    "CUDA_ERROR_ASSERT": "device-side assert triggered",
    "CUDA_ERROR_TOO_MANY_PEERS": "peer mapping resources exhausted",
    "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED": "part or all of the requested memory range is already mapped",
    "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED": "pointer does not correspond to a registered memory region",
    "CUDA_ERROR_HARDWARE_STACK_ERROR": "hardware stack error",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION": "an illegal instruction was encountered",
    "CUDA_ERROR_MISALIGNED_ADDRESS": "misaligned address",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE": "operation not supported on global/shared address space",
    "CUDA_ERROR_INVALID_PC": "invalid program counter",
    "CUDA_ERROR_LAUNCH_FAILED": "unspecified launch failure",
    "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE": "too many blocks in cooperative launch",
    "CUDA_ERROR_NOT_PERMITTED": "operation not permitted",
    "CUDA_ERROR_NOT_SUPPORTED": "operation not supported",
    "CUDA_ERROR_SYSTEM_NOT_READY": "system not yet initialized",
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": "system has unsupported display driver / cuda driver combination",
    "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": "forward compatibility was attempted on non supported HW",
    "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED": "operation not permitted when stream is capturing",
    "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED": "operation failed due to a previous error during capture",
    "CUDA_ERROR_STREAM_CAPTURE_MERGE": "operation would result in a merge of separate capture sequences",
    "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED": "capture was not ended in the same stream as it began",
    "CUDA_ERROR_STREAM_CAPTURE_UNJOINED": "capturing stream has unjoined work",
    "CUDA_ERROR_STREAM_CAPTURE_ISOLATION": "dependency created on uncaptured work in another stream",
    "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT": "operation would make the legacy stream depend on a capturing blocking stream",
    "CUDA_ERROR_CAPTURED_EVENT": "operation not permitted on an event last recorded in a capturing stream",
    "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD": "attempt to terminate a thread-local capture sequence from another thread",
    "CUDA_ERROR_TIMEOUT": "wait operation timed out",
    "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE": "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update",
    "CUDA_ERROR_UNKNOWN": "unknown error",
}


def c_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def errors():
    text = open(os.path.join(INC, "cuda.h")).read()
    m = re.search(r"typedef enum cudaError_enum \{(.*?)\} CUresult;", text, re.S)
    body = m.group(1)
    out = []
    for doc, name, val in re.findall(r"/\*\*(.*?)\*/\s*(CUDA_\w+)\s*=\s*(\d+)", body, re.S):
        if name in KNOWN:
            msg = KNOWN[name]
        else:
            lines = [l.strip().lstrip("*").strip() for l in doc.splitlines()]
            lines = [l for l in lines if l and not l.startswith("\\deprecated")]
            msg = " ".join(lines)
            msg = re.sub(r"::", "", msg)
            msg = re.split(r"(?<=[a-z\)])\. ", msg)[0].rstrip(".")
            msg = re.sub(r"^This (error )?indicates (that )?", "", msg)
            msg = msg[:1].lower() + msg[1:]
        out.append((int(val), name, msg))
    return sorted(out)


def procs():
    text = open(os.path.join(INC, "cudaTypedefs.h")).read()
    found = set(re.findall(r"\bPFN_(cu\w+?)_v(\d+)(_ptds|_ptsz)?\b", text))
    by_name = {}
    for name, ver, pt in found:
        by_name.setdefault(name, set()).add((int(ver), pt))
    rows = []
    for name, entries in by_name.items():
        plain = sorted(v for v, pt in entries if not pt)
        sym_of = {}
        for k, v in enumerate(plain):
            sym_of[v] = name if k == 0 else "%s_v%d" % (name, k + 1)
        for v, pt in sorted(entries):
            if not pt:
                rows.append((name, v, 0, sym_of[v]))
                continue
            base = [p for p in plain if p <= v]
            if not base:
                continue
            rows.append((name, v, 1, sym_of[base[-1]] + pt))
    return sorted(rows)


def main():
    errs = errors()
    rows = procs()
    if EXPORTS:
        exported = set(open(EXPORTS).read().split())
        missing = sorted({r[3] for r in rows} - exported)
        if missing:
            print("note: table symbols not exported by the real driver:", " ".join(missing))
    with open(OUT, "w") as f:
        f.write("/* Generated by tests/standin/gen_tables.py from the CUDA headers. Do not edit. */\n")
        f.write("#ifndef SCUDA_STANDIN_TABLES_H\n#define SCUDA_STANDIN_TABLES_H\n\n")
        f.write("typedef struct si_error_row { int code; const char *name; const char *msg; } si_error_row;\n")
        f.write("static const si_error_row si_error_table[] = {\n")
        for val, name, msg in errs:
            f.write("    {%d, %s, %s},\n" % (val, c_str(name), c_str(msg)))
        f.write("};\n\n")
        f.write("/* name, CUDA version that introduced this form, per-thread form?, symbol */\n")
        f.write("typedef struct si_proc_row { const char *name; int version; int per_thread; const char *symbol; } si_proc_row;\n")
        f.write("static const si_proc_row si_proc_table[] = {\n")
        for name, ver, pt, sym in rows:
            f.write("    {%s, %d, %d, %s},\n" % (c_str(name), ver, pt, c_str(sym)))
        f.write("};\n\n#endif\n")
    print("wrote %s: %d errors, %d proc rows" % (OUT, len(errs), len(rows)))


main()
