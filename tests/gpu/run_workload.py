"""run_workload.py SUITE NAME - run workload NAME of tests/gpu/SUITE/workloads.py
and print its result as JSON on the last line of stdout. The suites' tests
run this natively and through SCUDA and compare the two results."""
import json
import os
import sys

if __name__ == "__main__":
    suite, name = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), suite))
    import workloads  # noqa: E402  (the suite's own)

    result = workloads.ALL[name]()
    print("RESULT " + json.dumps(result, sort_keys=True), flush=True)
