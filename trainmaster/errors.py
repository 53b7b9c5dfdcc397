"""The root of trainmaster's exception tree.

TrainmasterError                 reported as "error: <message>", exit code 1 unless set
 ├── UsageError                  a command line that cannot work (exit 2), as click's own
 ├── spec.SpecError              a spec could not be used
 │    ├── SpecReadError          not readable, not YAML
 │    └── SpecInvalidError       every problem, with its path and line
 ├── apply.ApplyError            `trainmaster apply` could not apply an object
 ├── bench.BenchError            a benchmark cannot run as asked
 ├── cluster.ClusterError        the local control plane could not start, stop or answer
 ├── datacache.CapacityError     a dataset does not fit the node's cache
 ├── datacache.SourceError       a dataset's source cannot be read
 ├── engine.EngineError          the Pulumi engine cannot run on this project
 ├── image.ImageError            the trainmaster image could not be built
 ├── kubeclient.KubeConfigError  no usable kubeconfig (exit 2: a file the user named)
 ├── plan.PlanError              `trainmaster plan` cannot compare two revisions
 ├── simulate.WorkloadError      a workload or a cluster cannot be simulated
 │    └── TraceError             a trace file, with its line
 └── toolchain.ToolchainError    a pinned binary could not be built or found

Outside the tree on purpose: kubeclient.ApiError (and the transport's HttpError), an API
call's failure with its HTTP status, which callers handle by status (404, 409, transient)
and wrap into one of the errors above when a person must read it; polling.WaitTimeout, a
TimeoutError.

The CLI turns these (and the API client's ``ApiError``, and an ``OSError`` naming a file)
into an exit code and one message at one place: ``trainmaster.cli._app.invoke``.

`except Exception` appears only at a process or task boundary, with a comment that says
why (a reconcile task, a reporter that must never take training down, a reflector that
must not stop its stream, a readiness probe); elsewhere code catches the error it means.
"""

from __future__ import annotations


class TrainmasterError(Exception):
    """Base of every error trainmaster reports to a person without a traceback."""

    exit_code = 1


class UsageError(TrainmasterError):
    """A command line that cannot work: options that do not go together, a bad option
    value, a name that names nothing. Exit 2, like click's own usage errors."""

    exit_code = 2
