"""test_gen_nvml.py - checks of the NVML generator's model (gen_nvml.py).

Run with the others: python3 -m unittest discover codegen (ctest: codegen/unittest).
The end-to-end behaviour of the generated code is tested against the CPU
stand-in NVML (tests/standin/nvml/, ctest e2e/nvml_*)."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gen_nvml  # noqa: E402
import nvml_spec  # noqa: E402


@unittest.skipIf(gen_nvml.find_nvml_include() is None, "nvml.h not installed (scripts/deps.sh)")
class NvmlModel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = gen_nvml.Model()

    def test_every_export_has_a_class(self):
        self.assertEqual(len(self.m.export_names), 404)
        for n in self.m.export_names:
            self.assertIn(self.m.fns[n].cls, gen_nvml.CLASSES, n)

    def test_only_the_spec_leaves_calls_unsupported(self):
        """A new unencodable shape must be described in nvml_spec.py, not
        silently become NOT_SUPPORTED."""
        unsupported = {n for n, f in self.m.fns.items() if f.cls == "unsupported"}
        spec = {n for n, s in self.m.spec.items() if s.cls == "unsupported"}
        self.assertEqual(unsupported, spec)

    def test_shapes(self):
        def kinds(name):
            return {a.name: a.kind for a in self.m.fns[name].args}
        self.assertEqual(kinds("nvmlDeviceGetName"), {"device": "handle", "name": "outstr", "length": "value"})
        self.assertEqual(kinds("nvmlDeviceGetComputeRunningProcesses_v3"),
                         {"device": "handle", "infoCount": "ptr", "infos": "array"})
        self.assertEqual(kinds("nvmlDeviceGetHandleByUUID"), {"uuid": "str_in", "device": "handle_out"})
        self.assertEqual(kinds("nvmlDeviceGetRunningProcessDetailList")["plist"], "struct_array")
        self.assertEqual(kinds("nvmlUnitGetDevices")["devices"], "handle_array")
        mem2 = [a for a in self.m.fns["nvmlDeviceGetMemoryInfo_v2"].args if a.name == "memory"][0]
        self.assertTrue(mem2.versioned)
        data = [a for a in self.m.fns["nvmlEventSetWait_v2"].args if a.name == "data"][0]
        self.assertEqual((data.dir, data.hfields), ("out", [("device", "NH_DEVICE")]))

    def test_ops_are_append_only(self):
        with open(os.path.join(HERE, "nvml_ops.txt")) as f:
            committed = f.read().split()
        ops = gen_nvml.gen_driver.assign_ops(committed, self.m.wanted_ops())
        self.assertEqual(ops[:len(committed)], committed)
        for n in nvml_spec.EXTRA_OPS:
            self.assertIn(n, ops)


if __name__ == "__main__":
    unittest.main()
