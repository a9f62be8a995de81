"""run_one.py NAME - run one workload and print its result as JSON on the
last line of stdout (the test compares native and SCUDA runs of this)."""
import json
import sys

import workloads

if __name__ == "__main__":
    result = workloads.ALL[sys.argv[1]]()
    print("RESULT " + json.dumps(result, sort_keys=True), flush=True)
