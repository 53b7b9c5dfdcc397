"""The image's root filesystem, from Debian's packages with mmdebstrap: a minimal bookworm
(the `essential` variant plus python3), a venv at /opt/trainmaster holding the project's
wheel and its runtime wheels, and the examples. Written as one tar, which becomes the
image's single layer.

mmdebstrap needs no container engine. As root it builds in a plain chroot (its "root"
mode); without root it uses an unprivileged user namespace ("unshare" mode). It comes from
Debian's own archive: `apt-get install mmdebstrap`, which ensure_mmdebstrap() does as root.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

from trainmaster.image._errors import ImageError
from trainmaster.image._inputs import DEBIAN_MIRRORS, DEBIAN_PACKAGES, DEBIAN_SUITE
from trainmaster.image._process import LineFn, run_step

VENV = "/opt/trainmaster"
EXAMPLES = f"{VENV}/examples"
NONROOT_UID = 65532  # the uid the generated Deployments run as (runAsUser)
# Documentation, manual pages and translations are of no use in a container.
_DPKG_EXCLUDES = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-include=/usr/share/locale/locale.alias",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
)


def ensure_mmdebstrap(log: Path, on_line: LineFn) -> str:
    """The mmdebstrap binary, installed from Debian's archive if it is missing."""
    found = shutil.which("mmdebstrap")
    if found:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise ImageError(
            "mmdebstrap is not installed: run `sudo apt-get install mmdebstrap` (Debian or "
            "Ubuntu), then `trainmaster image build` again"
        )
    on_line("installing mmdebstrap from Debian's archive (apt-get install mmdebstrap)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        run_step("apt-get install mmdebstrap",
                 ["apt-get", "install", "-y", "-q", "mmdebstrap"], log, on_line, env)
    except ImageError:
        run_step("apt-get update", ["apt-get", "update", "-q"], log, on_line, env)
        run_step("apt-get install mmdebstrap",
                 ["apt-get", "install", "-y", "-q", "mmdebstrap"], log, on_line, env)
    found = shutil.which("mmdebstrap")
    if not found:
        raise ImageError("apt-get installed mmdebstrap but it is not on PATH")
    return found


def _hooks(wheelhouse: Path, examples: Path | None) -> list[str]:
    q = shlex.quote
    install = (
        f'chroot "$1" {VENV}/bin/python /tmp/wheelhouse/$(cd "$1/tmp/wheelhouse" && '
        f"ls pip-*.whl)/pip install --no-index --no-deps --no-cache-dir --quiet "
        f"--disable-pip-version-check "
        f"$(cd \"$1/tmp/wheelhouse\" && ls *.whl | grep -v '^pip-' | sed 's|^|/tmp/wheelhouse/|')"
    )
    hooks = [
        # A venv without pip: pip runs once from its wheel and is not left in the image.
        f'chroot "$1" python3 -m venv --without-pip {VENV}',
        f"copy-in {q(str(wheelhouse))} /tmp",
        install,
        'rm -rf "$1/tmp/wheelhouse"',
        f"echo 'nonroot:x:{NONROOT_UID}:{NONROOT_UID}:nonroot:/home/nonroot:/usr/sbin/nologin'"
        ' >> "$1/etc/passwd"',
        f"echo 'nonroot:x:{NONROOT_UID}:' >> \"$1/etc/group\"",
        f'install -d -o {NONROOT_UID} -g {NONROOT_UID} "$1/home/nonroot"',
        # The commands on every PATH, not only the image config's.
        f'for b in trainmaster trainmaster-scheduler; do ln -s {VENV}/bin/$b '
        '"$1/usr/local/bin/$b"; done',
    ]
    if examples is not None:
        hooks.append(f"copy-in {q(str(examples))} {VENV}")
    return hooks


def build_rootfs(
    wheelhouse: Path, examples: Path | None, out: Path, log: Path, on_line: LineFn,
    source_date_epoch: int,
) -> Path:
    """Run mmdebstrap; return the rootfs tar."""
    mmdebstrap = ensure_mmdebstrap(log, on_line)
    cmd = [
        mmdebstrap, "--variant=essential", f"--include={','.join(DEBIAN_PACKAGES)}",
        *[f"--dpkgopt={opt}" for opt in _DPKG_EXCLUDES],
        *[f"--customize-hook={hook}" for hook in _hooks(wheelhouse, examples)],
        DEBIAN_SUITE, str(out), *DEBIAN_MIRRORS,
    ]
    # Fixed file times where mmdebstrap sets them, so equal inputs give equal layers more often.
    # Debian's own python3 for mmdebstrap's helpers (not a pyenv shim ahead on PATH).
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(source_date_epoch),
           "PATH": f"/usr/sbin:/usr/bin:/sbin:/bin:{os.environ.get('PATH', '')}"}
    run_step("mmdebstrap (the Debian rootfs)", cmd, log, on_line, env)
    return out


def mmdebstrap_version() -> str:
    found = shutil.which("mmdebstrap")
    if not found:
        return "absent"
    return subprocess.run([found, "--version"], capture_output=True, text=True,
                          check=False).stdout.strip()
