"""The launcher bundle: `trainmaster launch` as one self-contained zipapp,
`trainmaster-launch.pyz`, that runs on the Python of any training image (3.8 or newer)
without trainmaster or its dependencies installed there.

The gang's init container (the trainmaster image) writes it into an emptyDir that the
training container mounts; the launch script runs it with the image's own python. It holds
trainmaster.launch and trainmaster.api (standard library only, in a pod) and
prometheus_client (pure Python).
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

BUNDLE_NAME = "trainmaster-launch.pyz"
MAIN = "from trainmaster.launch._main import main\nraise SystemExit(main())\n"
_SKIP = ("__pycache__", "twisted", "django", "aiohttp", "bridge")


def _package_files(package: Path) -> list[Path]:
    return sorted(p for p in package.rglob("*.py")
                  if not any(part in _SKIP for part in p.relative_to(package).parts))


def write_bundle(directory: Path) -> Path:
    """Write the zipapp into `directory` (atomically: a reader sees all or nothing)."""
    import prometheus_client

    import trainmaster
    import trainmaster.api
    import trainmaster.launch

    directory.mkdir(parents=True, exist_ok=True)
    target = directory / BUNDLE_NAME
    partial = directory / f".{BUNDLE_NAME}.partial"
    launch = Path(trainmaster.launch.__file__).parent
    api = Path(trainmaster.api.__file__).parent
    client = Path(prometheus_client.__file__).parent
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("__main__.py", "#!/usr/bin/env python3\n" + MAIN)
        archive.write(Path(trainmaster.__file__), "trainmaster/__init__.py")
        for path in _package_files(launch):
            archive.write(path, f"trainmaster/launch/{path.relative_to(launch)}")
        for path in _package_files(api):
            archive.write(path, f"trainmaster/api/{path.relative_to(api)}")
        for path in _package_files(client):
            archive.write(path, f"prometheus_client/{path.relative_to(client)}")
    os.chmod(partial, 0o755)
    partial.replace(target)
    return target
