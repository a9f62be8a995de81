"""Tests of the driver-API generator: python3 -m unittest discover codegen

The loopback test (compiled C: generated client stubs talking to generated
server handlers in one process) needs gcc and cuda.h; it is skipped without
them.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import gen_driver  # noqa: E402

FIXTURE = os.path.join(HERE, "testdata", "procaddr-driver580.txt")
CUDART_NAMES = os.path.join(HERE, "testdata", "cudart-getprocaddress-names.txt")

_model = None
_files = None


def model():
    global _model, _files
    if _model is None:
        _model = gen_driver.Model()
        _files = gen_driver.generate(ROOT, _model)
    return _model


def files():
    model()
    return _files


def read_names(path):
    with open(path) as f:
        return [l.split()[0] for l in f if l.strip() and not l.startswith("#")]


def fixture():
    """{(name, flags): [(version, status, symbol)]} of the real driver."""
    out = {}
    with open(FIXTURE) as f:
        for line in f:
            if line.startswith("#"):
                continue
            name, flags, version, status, sym = line.split()
            out.setdefault((name, int(flags)), []).append((int(version), int(status), sym))
    return out


def lookup(table, name, version, flags):
    """The algorithm of procaddr_find() in procaddr.gen.c, over the model."""
    ents = [(v, f, n) for b, v, f, n in table if b == name]
    if not ents:
        return 1, "-"
    want = "" if not (flags & 2) or not any(f for _, f, _ in ents) else "pt"
    best = None
    for v, f, n in ents:
        if (want == "pt") == bool(f) and v <= version and (best is None or v > best[0]):
            best = (v, n)
    return (0, best[1]) if best else (2, "-")


class ProcAddr(unittest.TestCase):
    def t(self, name, version, flags=0):
        return lookup(model().procaddr, name, version, flags)[1]

    def test_known_cases(self):
        self.assertEqual(self.t("cuMemAlloc", 3020), "cuMemAlloc_v2")
        self.assertEqual(self.t("cuMemAlloc", 2000), "cuMemAlloc")
        self.assertEqual(self.t("cuMemAlloc", 1000), "-")
        self.assertEqual(self.t("cuCtxCreate", 12050), "cuCtxCreate_v4")
        self.assertEqual(self.t("cuCtxCreate", 11040), "cuCtxCreate_v3")
        self.assertEqual(self.t("cuCtxCreate", 3020), "cuCtxCreate_v2")
        self.assertEqual(self.t("cuStreamQuery", 7000, 2), "cuStreamQuery_ptsz")
        self.assertEqual(self.t("cuStreamQuery", 7000, 0), "cuStreamQuery")
        self.assertEqual(self.t("cuMemcpyHtoD", 7000, 2), "cuMemcpyHtoD_v2_ptds")
        # Driver 580 knows no per-thread cuMemcpyHtoD before 7.0 and says
        # VERSION_NOT_SUFFICIENT rather than falling back to the legacy one.
        self.assertEqual(self.t("cuMemcpyHtoD", 3020, 2), "-")
        self.assertEqual(self.t("cuGetProcAddress", 12000), "cuGetProcAddress_v2")
        self.assertEqual(self.t("cuGetProcAddress", 11030), "cuGetProcAddress")
        self.assertEqual(self.t("cuStreamDestroy", 4000), "cuStreamDestroy_v2")
        self.assertEqual(self.t("cuEventElapsedTime", 12080), "cuEventElapsedTime_v2")
        self.assertEqual(self.t("cuDeviceGetUuid", 11040), "cuDeviceGetUuid_v2")
        self.assertEqual(self.t("cuGraphInstantiate", 11000), "cuGraphInstantiate_v2")
        self.assertEqual(self.t("cuTexRefSetAddress2D", 4010), "cuTexRefSetAddress2D_v3")
        self.assertEqual(self.t("cuLaunchKernelEx", 12000, 2), "cuLaunchKernelEx_ptsz")
        self.assertEqual(self.t("cuMemAlloc_v2", 13000), "-")  # only base names are known

    def test_matches_real_driver(self):
        """Replays driver 580's answers at every version where any answer changes."""
        table = model().procaddr
        fx = fixture()
        versions = {v for tl in fx.values() for v, _, _ in tl} | {t[1] for t in table}
        versions = sorted({x for v in versions for x in (v - 10, v, v + 10) if 1000 <= x <= 13000} | {13000})
        bad = []
        for (name, flags), tl in fx.items():
            for v in versions:
                exp = [(st, sym) for vv, st, sym in tl if vv <= v][-1]
                got = lookup(table, name, v, flags)
                if got != exp:
                    bad.append((name, flags, v, exp, got))
        self.assertEqual(bad[:10], [])
        self.assertGreater(len(fx), 2000)

    def test_cudart_names_resolve(self):
        table = model().procaddr
        for name in read_names(CUDART_NAMES):
            for flags in (0, 2):
                self.assertNotEqual(lookup(table, name, 13000, flags)[1], "-", name)

    def test_targets_are_exports(self):
        m = model()
        for base, ver, flav, name in m.procaddr:
            self.assertIn(name, m.exports)
            self.assertEqual(m.exports[name].base, base)


class Exports(unittest.TestCase):
    def test_every_export_defined_exactly_once(self):
        m = model()
        exports = read_names(gen_driver.EXPORTS_FILE)
        self.assertEqual(len(exports), 682)
        stubs = files()["src/client/stubs.gen.c"]
        generated = re.findall(r"^EXPORT CUresult (\w+)\(", stubs, re.M)
        trampolines = re.findall(r"^SCUDA_TRAMPOLINE\((\w+),", stubs, re.M)
        fallback = re.findall(r"^EXPORT CUresult (\w+)\(void\) \{ return scuda_unsupported_", stubs, re.M)
        self.assertEqual(sorted(trampolines), sorted(fallback))
        generated = [n for n in generated if n not in fallback] + trampolines
        hand = [n for n, e in m.exports.items() if e.cls in ("manual", "local")]
        both = generated + hand
        self.assertEqual(len(both), len(set(both)), "defined twice")
        self.assertEqual(sorted(both), sorted(exports))

    def test_hand_written_functions_exist(self):
        """Every manual/local export is defined by a hand-written src/client file."""
        m = model()
        text = ""
        for fn in sorted(os.listdir(os.path.join(ROOT, "src", "client"))):
            if fn.endswith(".c") and not fn.endswith(".gen.c"):
                with open(os.path.join(ROOT, "src", "client", fn)) as f:
                    text += f.read()
        defined = set(re.findall(r"^(?:EXPORT\s+)?CUresult\s+(cu\w+)\s*\(", text, re.M))
        hand = {n for n, e in m.exports.items() if e.cls in ("manual", "local")}
        self.assertEqual(sorted(hand - defined), [], "spec says hand-written, no client file defines it")
        self.assertEqual(sorted((defined & set(m.exports)) - hand), [], "hand-written and generated")

    @unittest.skipUnless(shutil.which("gcc") and shutil.which("nm"), "needs gcc and nm")
    def test_nm_of_compiled_stubs(self):
        m = model()
        with tempfile.TemporaryDirectory() as tmp:
            obj = os.path.join(tmp, "stubs.o")
            compile_c([os.path.join(ROOT, "src/client/stubs.gen.c")], obj, m, ["-c", "-fvisibility=hidden"])
            out = subprocess.run(["nm", "--defined-only", obj], capture_output=True, text=True, check=True).stdout
        syms = [l.split()[2] for l in out.splitlines() if l.split()[1] == "T"]
        exported = [s for s in syms if s.startswith("cu")]
        hand = [n for n, e in m.exports.items() if e.cls in ("manual", "local")]
        self.assertEqual(sorted(exported + hand), sorted(read_names(gen_driver.EXPORTS_FILE)))


class Ops(unittest.TestCase):
    def test_registry_is_stable(self):
        path = os.path.join(ROOT, gen_driver.OPS_FILE)
        with open(path) as f:
            committed = f.read()
        self.assertEqual(files()[gen_driver.OPS_FILE], committed, "re-running changes ops.txt")

    def test_ids_only_appended(self):
        old = ["scuda_ping", "cuOld", "cuB"]
        self.assertEqual(gen_driver.assign_ops(old, ["scuda_ping", "cuA", "cuB"]),
                         ["scuda_ping", "cuOld", "cuB", "cuA"])

    def test_every_wire_function_has_an_op(self):
        m = model()
        ops = set(read_names(os.path.join(ROOT, gen_driver.OPS_FILE)))
        for name, e in m.exports.items():
            if e.op:
                self.assertIn(name, ops)
        for name in m.internal.ops:
            self.assertIn(name, ops)

    def test_no_op_is_reserved_for_nothing(self):
        """Every line of the registry is an op something sends (the
        registry is compacted when the protocol version changes)."""
        wanted = set(model().wanted_ops())
        for name in read_names(os.path.join(ROOT, gen_driver.OPS_FILE)):
            self.assertIn(name, wanted, "%s is in codegen/ops.txt but nothing sends it" % name)

    def test_every_message_is_sent(self):
        """An op of MESSAGES that no hand-written client code sends is dead."""
        client = ""
        for name in sorted(os.listdir(os.path.join(ROOT, "src", "client"))):
            if name.endswith(".c") and not name.endswith(".gen.c"):
                with open(os.path.join(ROOT, "src", "client", name)) as f:
                    client += f.read()
        # Retired: kept in the registry (it only grows), answered
        # NOT_SUPPORTED for an older client, sent by none of ours.
        retired = {"scuda_snapshot"}
        for name in model().internal.ops:
            if name in retired:
                self.assertNotRegex(client, r"\bOP_%s\b" % name, "%s is retired but still sent" % name)
                continue
            self.assertRegex(client, r"\bOP_%s\b" % name, "nothing sends %s" % name)

    def test_deterministic(self):
        again = gen_driver.generate(ROOT, gen_driver.Model(model().h))
        self.assertEqual(again, files())

    def test_committed_files_are_current(self):
        for rel, text in files().items():
            with open(os.path.join(ROOT, rel)) as f:
                self.assertEqual(f.read(), text, "%s is stale: run python3 codegen/gen_driver.py" % rel)


class HookFlags(unittest.TestCase):
    """What the hook flags put in a stub (driver_spec.py's docstring)."""

    def stub(self, name):
        text = files()["src/client/stubs.gen.c"]
        start = text.index("EXPORT CUresult %s(" % name)
        return text[start:text.index("\n}\n", start)]

    def test_one_way_when(self):
        for name in ("cuFuncSetAttribute", "cuKernelSetAttribute"):
            body = self.stub(name)
            ask = body.index("if (hook_one_way_%s(" % name)
            self.assertLess(body.index("memo_setting_is("), ask, "a repeated set is answered before the hook")
            self.assertLess(ask, body.index("rpc_async(&c)"))
            self.assertLess(body.index("rpc_async(&c)"), body.index("rpc_sync(&c)"), "the else branch waits")

    def test_memo_miss(self):
        text = files()["src/client/stubs.gen.c"]
        self.assertIn("void memo_key_cuOccupancyMaxActiveClusters(wire_buf *key, ", text)
        body = self.stub("cuOccupancyMaxActiveClusters")
        self.assertIn("memo_key_cuOccupancyMaxActiveClusters(&key, ", body)
        self.assertLess(body.index("memo_lookup("), body.index("hook_memo_miss_cuOccupancyMaxActiveClusters(&g_, &key"),
                        "the hook is asked on a miss only")
        self.assertLess(body.index("hook_memo_miss_"), body.index("rpc_sync(&c)"))


class Spec(unittest.TestCase):
    def test_issue2_surface_is_covered(self):
        m = model()
        cls = {n: e.cls for n, e in m.exports.items()}
        for n in ("cuMemAlloc_v2", "cuMemFree_v2", "cuMemGetInfo_v2", "cuMemAllocPitch_v2", "cuStreamCreate",
                  "cuStreamCreateWithPriority", "cuStreamDestroy_v2", "cuStreamQuery",
                  "cuStreamWaitEvent", "cuStreamGetPriority", "cuEventCreate", "cuEventRecord", "cuEventQuery",
                  "cuEventSynchronize", "cuEventElapsedTime_v2", "cuEventDestroy_v2", "cuMemsetD8Async",
                  "cuMemsetD32_v2", "cuFuncSetAttribute",
                  "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", "cuOccupancyMaxActiveClusters",
                  "cuCtxGetStreamPriorityRange", "cuCtxGetLimit"):
            self.assertIn(cls[n], ("sync", "async", "memo"), n)
        # Hand-written: the fixed attributes come from one batched reply per function.
        self.assertEqual(cls["cuFuncGetAttribute"], "manual")
        self.assertEqual(cls["cuKernelGetAttribute"], "manual")
        # Hand-written: answered locally when a copy's reply proved the stream idle.
        self.assertEqual(cls["cuStreamSynchronize"], "manual")
        self.assertEqual(cls["cuStreamIsCapturing"], "manual")  # local while no capture is active
        self.assertIn("blocking", m.internal.ops["cuStreamSynchronize"].flags)
        self.assertTrue(m.exports["cuEventSynchronize"].blocking)
        # Only calls that observe earlier work report a one-way call's error.
        self.assertIn("observes", m.internal.ops["cuStreamSynchronize"].flags)
        for n in ("cuEventSynchronize", "cuEventQuery", "cuStreamQuery", "cuMemcpyAtoH_v2"):
            self.assertTrue(m.exports[n].observes, n)
        for n in ("cuMemAlloc_v2", "cuMemGetInfo_v2", "cuStreamCreate", "cuMemcpyHtoA_v2"):
            self.assertFalse(m.exports[n].observes, n)
        self.assertEqual(cls["cuLaunchKernel"], "manual")
        self.assertEqual(cls["cuMemcpyHtoD_v2"], "manual")
        self.assertEqual(cls["cuMemcpyHtoD"], "manual")  # 32-bit legacy ABI: src/client/legacy.c
        self.assertEqual(cls["cuStreamQuery_ptsz"], "wrapper")

    def test_generated_files_have_banner(self):
        for rel, text in files().items():
            if rel.endswith((".c", ".h")):
                self.assertTrue(text.startswith(gen_driver.BANNER), rel)


def compile_c(sources, out, m, extra, libs=()):
    cmd = (["gcc", "-std=c11", "-D_GNU_SOURCE", "-D__CUDA_API_VERSION_INTERNAL=1", "-Wall", "-Wextra", "-Werror",
            "-fPIC", "-I" + m.h.cuda_inc, "-I" + os.path.join(ROOT, "src"), "-I" + os.path.join(HERE, "tests")]
           + extra + sources + ["-o", out] + list(libs))
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError("compile failed: %s\n%s" % (" ".join(cmd), r.stderr[-4000:]))


@unittest.skipUnless(shutil.which("gcc"), "needs gcc")
class Loopback(unittest.TestCase):
    def test_loopback(self):
        m = model()
        with tempfile.TemporaryDirectory() as tmp:
            # the hand-written client functions, as dummies (no cuda.h here)
            dummies = os.path.join(tmp, "dummies.c")
            with open(dummies, "w") as f:
                f.write("/* stand-ins for the hand-written client functions */\n")
                for n in sorted(n for n, e in m.exports.items() if e.cls in ("manual", "local")):
                    f.write("int %s(void);\nint %s(void) { return 999; }\n" % (n, n))
            srcs = [os.path.join(ROOT, p) for p in (
                "src/client/stubs.gen.c", "src/client/procaddr.gen.c", "src/client/memo.c",
                "src/server/dispatch.gen.c", "src/common/driver_table.gen.c", "src/common/ops.gen.c",
                "src/common/wire.c", "src/common/msg_arena.c", "src/common/messages.gen.c", "src/common/log.c",
                "codegen/tests/loopback_runtime.c",
                "codegen/tests/loopback_test.c")] + [dummies]
            exe = os.path.join(tmp, "loopback")
            san = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-g"]
            try:
                compile_c(srcs, exe, m, san, ["-ldl", "-lpthread"])
            except AssertionError:
                compile_c(srcs, exe, m, ["-g"], ["-ldl", "-lpthread"])
            r = subprocess.run([exe, FIXTURE, CUDART_NAMES], capture_output=True, text=True,
                               env=dict(os.environ, ASAN_OPTIONS="detect_leaks=1", SCUDA_LOG="error"))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertTrue(r.stdout.startswith("ok "), r.stdout)


if __name__ == "__main__":
    unittest.main()
