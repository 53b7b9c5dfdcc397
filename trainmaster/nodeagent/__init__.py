"""Node agents: small loops that run on every GPU node (a DaemonSet) and report what only
the node can see as node conditions, for the operator to act on.

The NIC agent reads the InfiniBand/RoCE ports from sysfs and sets ``NICHealthy``; the
operator fences a node on ``NICHealthy=False`` (trainmaster.operator._faults).
"""

from trainmaster.api import NIC_CONDITION
from trainmaster.nodeagent._condition import condition_patch, report_condition
from trainmaster.nodeagent._metrics import NicMetrics
from trainmaster.nodeagent._nic import NicVerdict, judge_ports
from trainmaster.nodeagent._run import NicAgent, NicAgentConfig, annotated_netdevs
from trainmaster.nodeagent._sysfs import Port, read_netdevs, read_ports

__all__ = [
    "NIC_CONDITION",
    "NicAgent",
    "NicAgentConfig",
    "NicMetrics",
    "NicVerdict",
    "Port",
    "annotated_netdevs",
    "condition_patch",
    "judge_ports",
    "read_netdevs",
    "read_ports",
    "report_condition",
]
