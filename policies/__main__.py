"""The CrossGuard policy pack: ``pulumi preview --policy-pack policies``.

Pulumi starts this file through the Python language host with the virtualenv named in
PulumiPolicy.yaml; PolicyPack() then serves the policies over gRPC until Pulumi stops it.
"""

import sys
from pathlib import Path

# Run the rules next to this file, not a copy installed in the virtualenv: the pack a pull
# request previews with must be the pack that pull request changes.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import EnforcementLevel, PolicyPack

from policies._crossguard import PACK_NAME, build_policies

PolicyPack(
    PACK_NAME,
    build_policies(),
    enforcement_level=EnforcementLevel.MANDATORY,
    description="trainmaster platform rules for training clusters and their jobs.",
)
