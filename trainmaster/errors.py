"""The root of trainmaster's exception tree.

TrainmasterError             reported as "error: <message>", exit code 1 unless set
 ├── UsageError              a command line that cannot work (exit 2), as click's own
 ├── spec.SpecError          a spec could not be used (see trainmaster.spec)
 ├── toolchain.ToolchainError a pinned binary could not be built or found
 ├── cluster.ClusterError    the local control plane could not start, stop or answer
 └── kubeclient.KubeConfigError  no usable kubeconfig (exit 2: a file the user named)

The CLI turns these (and the API client's ``ApiError``, and an ``OSError`` naming a
file) into an exit code and one message at one place: ``trainmaster.cli._app.invoke``.
"""

from __future__ import annotations


class TrainmasterError(Exception):
    """Base of every error trainmaster reports to a person without a traceback."""

    exit_code = 1


class UsageError(TrainmasterError):
    """A command line that cannot work: options that do not go together, a bad option
    value, a name that names nothing. Exit 2, like click's own usage errors."""

    exit_code = 2
