"""The root of trainmaster's exception tree.

TrainmasterError             reported as "error: <message>", exit code 1 unless set
 ├── spec.SpecError          a spec could not be used (see trainmaster.spec)
 ├── toolchain.ToolchainError a pinned binary could not be built or found
 └── cluster.ClusterError    the local control plane could not start, stop or answer
"""

from __future__ import annotations


class TrainmasterError(Exception):
    """Base of every error trainmaster reports to a person without a traceback."""

    exit_code = 1
