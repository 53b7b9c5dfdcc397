"""The real Pulumi engine on this project: `trainmaster pulumi ARGS...`.

preview / up / refresh / destroy run the project's program inline through the Automation API
(the built CLI and Kubernetes provider, no language host); other commands go to the CLI.
"""

from trainmaster.engine._args import (
    OPERATIONS,
    Operation,
    OperationName,
    operation_name,
    parse_operation,
)
from trainmaster.engine._env import (
    DEFAULT_PASSPHRASE,
    SHELL_FAMILIES,
    EngineError,
    engine_env,
    find_project,
    project_virtualenv,
    pulumi_home,
    shell_env,
    shell_exports,
)
from trainmaster.engine._main import main, passthrough
from trainmaster.engine._run import OperationResult, run_operation, workspace

__all__ = [
    "DEFAULT_PASSPHRASE",
    "OPERATIONS",
    "SHELL_FAMILIES",
    "EngineError",
    "Operation",
    "OperationName",
    "OperationResult",
    "engine_env",
    "find_project",
    "main",
    "operation_name",
    "parse_operation",
    "passthrough",
    "project_virtualenv",
    "pulumi_home",
    "run_operation",
    "shell_env",
    "shell_exports",
    "workspace",
]
