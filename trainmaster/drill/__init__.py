"""The real training job on a local cluster's real nodes, and recovery drills on it (a
process or container really killed, the gang restarted by the operator from its own
checkpoint; a torchrun worker killed and restarted in place), and where the datasets are
warm. Used by `trainmaster demo`, the realnode tests and `bench recovery --real`."""

from trainmaster.drill._datasets import (
    S3_PORT,
    mirror_buckets,
    s3_endpoint,
    serve_demo_datasets,
    serve_s3_dataset,
    served_here,
    served_mirror,
    story_shards,
)
from trainmaster.drill._drill import (
    MOVES_THE_GANG,
    SCENARIOS,
    DrillResult,
    ensure_scenario,
    run_drill,
    steppers,
    wait_training,
)
from trainmaster.drill._elastic import (
    ELASTIC_SCENARIOS,
    ElasticResult,
    make_elastic,
    run_elastic_drill,
)
from trainmaster.drill._ettr import (
    Accounting,
    Fault,
    FaultCost,
    Mark,
    account,
    progress_marks,
    split_runs,
)
from trainmaster.drill._faults import Killed
from trainmaster.drill._hang import run_hang
from trainmaster.drill._inplace import (
    InPlaceResult,
    logged_step,
    run_worker_kill,
    wait_torch_training,
)
from trainmaster.drill._jobspec import drilled_job, spec_real_images, with_restart_policy
from trainmaster.drill._logs import pod_log
from trainmaster.drill._nic import NIC_ALERT, NicDownResult, run_nic_down
from trainmaster.drill._preempt import run_preemption_drill
from trainmaster.drill._soak import FAULT_KINDS, SoakResult, faults_in, run_soak
from trainmaster.drill._soak_plot import plot_soak
from trainmaster.drill._soak_spec import soak_spec
from trainmaster.drill._stack import (
    ON_REAL_NODES,
    RealStack,
    build_stack_images,
    host_volume,
    job_pods,
    job_status,
    placed_on_real_nodes,
    pod_row,
    pods_table,
    pulumi_stack_spec,
    source_root,
    start_real_stack,
    wait_controllers,
    wait_prometheus,
)
from trainmaster.drill._torch_elastic import (
    TorchElasticResult,
    make_torch_elastic,
    run_torch_elastic_drill,
)
from trainmaster.drill._traffic import (
    InterfaceBytes,
    NodeInterfaceBytes,
    node_storage_traffic,
    parse_net_dev,
    rank_traffic,
)
from trainmaster.drill._warmups import DatasetNodes, dataset_nodes, stack_datasets

__all__ = [
    "ELASTIC_SCENARIOS",
    "FAULT_KINDS",
    "MOVES_THE_GANG",
    "NIC_ALERT",
    "ON_REAL_NODES",
    "S3_PORT",
    "SCENARIOS",
    "Accounting",
    "DatasetNodes",
    "DrillResult",
    "ElasticResult",
    "Fault",
    "FaultCost",
    "InPlaceResult",
    "InterfaceBytes",
    "Killed",
    "Mark",
    "NicDownResult",
    "NodeInterfaceBytes",
    "RealStack",
    "SoakResult",
    "TorchElasticResult",
    "account",
    "build_stack_images",
    "dataset_nodes",
    "drilled_job",
    "ensure_scenario",
    "faults_in",
    "host_volume",
    "job_pods",
    "job_status",
    "logged_step",
    "make_elastic",
    "make_torch_elastic",
    "mirror_buckets",
    "node_storage_traffic",
    "parse_net_dev",
    "placed_on_real_nodes",
    "plot_soak",
    "pod_log",
    "pod_row",
    "pods_table",
    "progress_marks",
    "pulumi_stack_spec",
    "rank_traffic",
    "run_drill",
    "run_elastic_drill",
    "run_hang",
    "run_nic_down",
    "run_preemption_drill",
    "run_soak",
    "run_torch_elastic_drill",
    "run_worker_kill",
    "s3_endpoint",
    "serve_demo_datasets",
    "serve_s3_dataset",
    "served_here",
    "served_mirror",
    "soak_spec",
    "source_root",
    "spec_real_images",
    "split_runs",
    "stack_datasets",
    "start_real_stack",
    "steppers",
    "story_shards",
    "wait_controllers",
    "wait_prometheus",
    "wait_torch_training",
    "wait_training",
    "with_restart_policy",
]
