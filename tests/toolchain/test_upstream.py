"""Upstream-release families (multus, kube-router): `go install MODULE@VERSION` first, as a
user's machine would; when that fails, the source archive from the folder the user gives,
built only after its sha256 matched the pin. Real `go`, the real module proxy (which refuses
these modules here), a throwaway cache."""

from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainmaster.cli import app
from trainmaster.toolchain import RECIPES, Recipe, ToolchainError, build, family_dir
from trainmaster.toolchain._recipes import UpstreamSource
from trainmaster.toolchain._upstream import SOURCES_ENV, read_source

HELLO_MAIN = ('package main\n\nimport "fmt"\n\n'
              'func main() { fmt.Println("hello from the archive") }\n')


def _tar_gz(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TRAINMASTER_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(SOURCES_ENV, raising=False)
    return tmp_path / "cache"


def _hello_family(monkeypatch: pytest.MonkeyPatch, sources: Path) -> Path:
    """A module no proxy serves (example.invalid), as a release archive in `sources`."""
    archive = _tar_gz({
        "hello-v0.1.0/go.mod": "module example.invalid/hello\n\ngo 1.22\n",
        "hello-v0.1.0/cmd/hello/main.go": HELLO_MAIN,
    })
    sources.mkdir(parents=True, exist_ok=True)
    (sources / "hello-v0.1.0.tar.gz").write_bytes(archive)
    recipe = Recipe(
        family="hello-upstream", version="v0.1.0",
        packages=("example.invalid/hello/cmd/hello",), binaries=("hello",),
        upstream=UpstreamSource(
            module="example.invalid/hello", commands=("cmd/hello",),
            archive="hello-v0.1.0.tar.gz", sha256=hashlib.sha256(archive).hexdigest(),
            archive_env={"GOFLAGS": "-mod=readonly"}),
    )
    monkeypatch.setitem(RECIPES, recipe.family, recipe)
    return sources / "hello-v0.1.0.tar.gz"


def test_go_install_failing_falls_back_to_the_checked_archive(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sources = tmp_path / "sources"
    archive = _hello_family(monkeypatch, sources)
    monkeypatch.setenv(SOURCES_ENV, str(sources))  # the environment variable, as make passes

    (result,) = build(["hello-upstream"])

    assert not result.cached
    out = subprocess.run([str(result.directory / "hello")], capture_output=True, text=True)
    assert out.stdout == "hello from the archive\n"
    origin = read_source(result.directory)
    assert origin.startswith(f"source archive {archive} (sha256 as pinned; go install from "
                             "the module proxy failed: ")
    assert "example.invalid/hello" in origin
    # The unpacked tree is removed once built; the next build reuses the cache entry.
    assert not (cache / "src" / "hello-upstream").exists()
    assert build(["hello-upstream"])[0].cached
    # `trainmaster tools list` says where each family came from.
    listed = CliRunner().invoke(app, ["tools", "list"])
    assert listed.exit_code == 0, listed.output
    assert f"hello-upstream v0.1.0: built from the source archive {archive}" in listed.output
    assert "multus v4.3.0: not built" in listed.output


def test_a_tampered_archive_is_refused_before_anything_is_unpacked(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sources = tmp_path / "sources"
    archive = _hello_family(monkeypatch, sources)
    data = bytearray(archive.read_bytes())
    data[-30] ^= 0xFF  # one byte of the compressed stream changed
    archive.write_bytes(bytes(data))

    with pytest.raises(ToolchainError) as err:
        build(["hello-upstream"], sources=sources)

    text = str(err.value)
    assert f"refusing {archive}: its sha256 is {hashlib.sha256(data).hexdigest()}" in text
    assert f"not the pinned {RECIPES['hello-upstream'].upstream.sha256}" in text  # type: ignore[union-attr]
    folder = family_dir("hello-upstream")
    assert not folder.exists()
    assert not folder.with_name(folder.name + ".partial").exists()
    assert not (cache / "src" / "hello-upstream" / "hello-v0.1.0").exists()


def test_multus_the_proxy_refuses_needs_a_sources_folder(cache: Path) -> None:
    """The real Multus recipe against the real proxy: go install fails (its version list is
    403 here), and without a sources folder the error says how to give one."""
    with pytest.raises(ToolchainError) as err:
        build(["multus"])
    text = str(err.value)
    assert "multus: go install gopkg.in/k8snetworkplumbingwg/multus-cni.v4@… failed (" in text
    assert "multus-cni-v4.3.0.tar.gz" in text
    assert "--sources DIR" in text and f"{SOURCES_ENV}=DIR" in text
    assert not family_dir("multus").exists()


def test_multus_with_a_wrong_archive_is_refused(cache: Path, tmp_path: Path) -> None:
    sources = tmp_path / "sources"
    sources.mkdir()
    fake = sources / "multus-cni-v4.3.0.tar.gz"
    fake.write_bytes(_tar_gz({"multus-cni-v4.3.0/go.mod": "module x\n"}))
    with pytest.raises(ToolchainError) as err:
        build(["multus"], sources=sources)
    assert f"refusing {fake}: its sha256 is" in str(err.value)
    assert not family_dir("multus").exists()


def test_a_missing_archive_names_the_folder_and_the_file(cache: Path, tmp_path: Path) -> None:
    with pytest.raises(ToolchainError) as err:
        build(["kube-router"], sources=tmp_path)
    assert (f"the sources folder {tmp_path} has no kube-router-v2.9.0.tar.gz"
            in str(err.value))


def test_a_root_package_and_its_data_files_come_from_the_archive(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """JobSet's shape: the controller is the module's root package (`.`), and files of the
    release (its CRDs) are copied into the family's folder beside the binary."""
    sources = tmp_path / "sources"
    sources.mkdir()
    archive = _tar_gz({
        "root-v0.2.0/go.mod": "module example.invalid/root\n\ngo 1.22\n",
        "root-v0.2.0/main.go": HELLO_MAIN,
        "root-v0.2.0/config/crd/thing.yaml": "kind: CustomResourceDefinition\n",
    })
    (sources / "root-v0.2.0.tar.gz").write_bytes(archive)
    recipe = Recipe(
        family="root-upstream", version="v0.2.0", packages=("example.invalid/root",),
        binaries=("root",),
        upstream=UpstreamSource(
            module="example.invalid/root", commands=(".",), archive="root-v0.2.0.tar.gz",
            sha256=hashlib.sha256(archive).hexdigest(),
            archive_env={"GOFLAGS": "-mod=readonly"},
            data_files=(("config/crd/thing.yaml", "crds/thing.yaml"),)),
    )
    monkeypatch.setitem(RECIPES, recipe.family, recipe)

    (result,) = build(["root-upstream"], sources=sources)

    out = subprocess.run([str(result.directory / "root")], capture_output=True, text=True)
    assert out.stdout == "hello from the archive\n"
    assert (result.directory / "crds" / "thing.yaml").read_text() == (
        "kind: CustomResourceDefinition\n")
    # go's error, not its progress lines, is what the origin quotes.
    assert "example.invalid/root@v0.2.0" in read_source(result.directory)


def test_a_family_with_no_pinned_archive_says_the_proxy_must_serve_it(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue's shape (served by the proxy, no archive pinned): when go install fails
    anyway, the error says so instead of asking for an archive nobody pinned."""
    recipe = Recipe(
        family="served-upstream", version="v0.3.0", packages=("example.invalid/served/cmd/s",),
        binaries=("s",),
        upstream=UpstreamSource(module="example.invalid/served", commands=("cmd/s",)))
    monkeypatch.setitem(RECIPES, recipe.family, recipe)
    with pytest.raises(ToolchainError) as err:
        build(["served-upstream"])
    text = str(err.value)
    assert "served-upstream: go install example.invalid/served@… failed (" in text
    assert "no source archive is pinned for it: check that $GOPROXY serves " \
           "example.invalid/served" in text
    assert not family_dir("served-upstream").exists()
