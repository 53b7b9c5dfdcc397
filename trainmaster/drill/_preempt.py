"""Preemption on the real training job: a gang of a higher priority that needs the job's
real nodes arrives, trainmaster-scheduler evicts the job's gang to free a leaf for it,
the operator restarts the job (cause Preempted, not counted), and once the preemptor is
done the job comes back on the real nodes and resumes at its checkpoint step.

The preemptor is one pod of a required-leaf PodGroup shaped like one of the job's pods
(its node selector, tolerations, image and resources), of the highest-priority queue in
the spec (which must rank above the job's), that sleeps ``hold_seconds`` and exits: the
victim's new gang can be placed only once it is gone. What is measured is the drill's
(``_drill._measure``): the same resumed step, checkpoint and timing fields as a kill.
"""

from __future__ import annotations

import time
from typing import Any

from trainmaster.api import (
    POD_GROUP_LABEL,
    QUEUE_LABEL,
    TOPOLOGY_DOMAIN_ANNOTATION,
    TOPOLOGY_MODE_ANNOTATION,
)
from trainmaster.cluster import ClusterError
from trainmaster.drill._drill import DrillResult, _logs, _measure, wait_training
from trainmaster.drill._faults import Killed
from trainmaster.drill._stack import RealStack, Report
from trainmaster.kubeclient import SyncKube, pod_path, podgroup_path
from trainmaster.objects import priority_class_name

PREEMPTOR = "preemptor"
PODGROUP_LABEL = POD_GROUP_LABEL


def _top_queue(stack: RealStack) -> tuple[str, int]:
    queues = stack.spec.scheduler.queues
    if not queues:
        raise ClusterError("the spec has no scheduler.queues: no priority to preempt with")
    top = max(queues, key=lambda q: q.priority)
    return top.name, top.priority


def preemptor_objects(stack: RealStack, victim: dict[str, Any], hold_seconds: float
                      ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The preemptor's PodGroup (one member, required in one leaf) and pod."""
    queue, priority = _top_queue(stack)
    if priority <= int(victim["spec"].get("priority") or 0):
        raise ClusterError(f"queue {queue} (priority {priority}) does not rank above "
                           f"{victim['metadata']['name']} ({victim['spec'].get('priority')}): "
                           "put the job in a lower-priority queue")
    ns = victim["metadata"]["namespace"]
    trainer = victim["spec"]["containers"][0]
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": PREEMPTOR, "namespace": ns,
                     "annotations": {TOPOLOGY_DOMAIN_ANNOTATION: "leaf",
                                     TOPOLOGY_MODE_ANNOTATION: "required"}},
        "spec": {"minMember": 1},
    }
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{PREEMPTOR}-0", "namespace": ns,
                     "labels": {PODGROUP_LABEL: PREEMPTOR, QUEUE_LABEL: queue}},
        "spec": {
            "schedulerName": victim["spec"]["schedulerName"],
            "priorityClassName": priority_class_name(stack.spec, queue),
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": victim["spec"].get("nodeSelector") or {},
            "tolerations": victim["spec"].get("tolerations") or [],
            "containers": [{
                "name": "hold", "image": trainer["image"], "imagePullPolicy": "IfNotPresent",
                "command": ["python", "-c", f"import time; time.sleep({hold_seconds})"],
                "resources": trainer.get("resources") or {},
            }],
        },
    }
    return group, pod


def run_preemption_drill(stack: RealStack, report: Report, timeout: float = 300,
                         hold_seconds: float = 20) -> DrillResult:
    """Wait until the job trains on the real nodes, then let the preemptor in; the result
    says where the job's new gang resumed (``killed`` names the preemptor)."""
    with SyncKube.connect(stack.kubeconfig) as kube:
        attempt, pods = wait_training(stack, kube, report, timeout)
        victim = pods[0]
        group, pod = preemptor_objects(stack, victim, hold_seconds)
        ns = pod["metadata"]["namespace"]
        before = {i: (lg.last_step() or 0) for i, lg in _logs(stack, pods).items() if lg}

        def remove() -> None:
            kube.delete(pod_path(ns, pod["metadata"]["name"]), grace=0, missing_ok=True)
            kube.delete(podgroup_path(ns, PREEMPTOR), missing_ok=True)

        arrived = time.time()
        kube.post(podgroup_path(ns), group)
        kube.post(pod_path(ns), pod)
        killed = Killed(f"preempted by {ns}/{PREEMPTOR} ({pod['spec']['priorityClassName']})",
                        str(victim["spec"].get("nodeName")), victim["metadata"]["name"],
                        remove)
        try:
            return _measure(stack, kube, "preemption", killed, arrived, attempt, pods,
                            before, report, timeout, lambda: None)
        finally:
            remove()
