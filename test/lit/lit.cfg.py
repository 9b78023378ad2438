# lit configuration for sdc's IR tests. Run: lit test/lit
import os
import sys

import lit.formats

config.name = "sdc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["lit.cfg.py", "Inputs"]

# sdc-opt and filecheck live next to the Python that runs lit (the project's venv).
bin_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = bin_dir + os.pathsep + config.environment.get("PATH", os.environ.get("PATH", ""))
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
# A checkout run with another checkout's venv (PYTHONPATH=<checkout>) tests its own sources.
if os.environ.get("PYTHONPATH"):
    config.environment["PYTHONPATH"] = os.environ["PYTHONPATH"]
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("FileCheck", "filecheck"))
