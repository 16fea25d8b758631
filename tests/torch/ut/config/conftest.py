"""Make ``_test_dummy`` importable as a top-level module, as ``--module _test_dummy`` needs."""

import sys
from pathlib import Path

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
