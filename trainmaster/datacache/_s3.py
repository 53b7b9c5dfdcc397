"""Copying an `s3://bucket/prefix` dataset: every object under the prefix, in parallel,
resumable.

The client is boto3 (AWS's SDK), so the standard configuration applies as it does to the
aws CLI: `AWS_ENDPOINT_URL` (an on-prem store: Ceph RGW, SeaweedFS, versitygw, MinIO),
`AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN`, `AWS_REGION`,
`AWS_PROFILE` and the shared config/credentials files, instance and pod identities.

Resume: each object is written to `<file>.tm-part` and renamed into place once all its
bytes arrived, then recorded (key, size, ETag) in the journal `.trainmaster-objects.jsonl`
of the partial directory. A warm-up that was killed or failed leaves that directory; the
next one keeps every object whose key, size and ETag match the listing and whose file
has that size, and downloads the rest. A GET carries `If-Match: <ETag>`, so an object
replaced between the listing and its download is refused rather than copied half-old.

Errors: `classify` sorts an S3 call's failure by what its user fixes (keys missing or
refused, endpoint unreachable, no bucket, access denied, an object changed, other), and
`explain` words it in one line with the caller's own spec fields (S3Fields): the dataset
reads' here (DATASET_FIELDS), the checkpoint mirror's in _checkpoint_mirror.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal
from urllib.parse import urlsplit

from trainmaster.datacache._progress import Progress
from trainmaster.errors import TrainmasterError

OWN = ".trainmaster-"
"""Files of ours in the partial directory (journal, source) start so; keys never land there."""
JOURNAL = f"{OWN}objects.jsonl"
PART_SUFFIX = ".tm-part"
CHUNK = 1 << 20
DEFAULT_WORKERS = 8


class S3Error(TrainmasterError):
    """The bucket cannot be read: credentials, a missing bucket or prefix, no endpoint."""


@dataclass(frozen=True)
class S3Object:
    key: str
    rel: str
    """Path under the dataset directory (the key less the prefix)."""
    size: int
    etag: str


@dataclass(frozen=True)
class S3Source:
    bucket: str
    prefix: str

    @classmethod
    def parse(cls, source: str) -> S3Source:
        parts = urlsplit(source)
        if parts.scheme != "s3" or not parts.netloc:
            raise S3Error(f"--source {source}: write s3://bucket or s3://bucket/prefix")
        return cls(parts.netloc, parts.path.lstrip("/"))


def _client(workers: int) -> Any:
    """An S3 client from the standard AWS configuration (environment, profile, files)."""
    import boto3
    from botocore.config import Config

    session = boto3.session.Session()
    config = Config(
        max_pool_connections=max(workers, 10),
        retries={"max_attempts": 5, "mode": "standard"},
        connect_timeout=10,
        read_timeout=60,
        # Path-style URLs (http://host/bucket/key) work with every on-prem store; boto3
        # keeps virtual-host style for AWS itself when no endpoint is set.
        s3={"addressing_style": "path"} if _endpoint() else {},
    )
    # botocore reads AWS_DEFAULT_REGION only; AWS_REGION is the variable the other SDKs
    # and the aws CLI v2 read first, so it wins here too.
    return session.client("s3", config=config, region_name=os.environ.get("AWS_REGION") or None)


def _endpoint() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")


S3FailureKind = Literal["no-credentials", "refused-credentials", "unreachable", "no-bucket",
                        "access-denied", "changed", "other"]

REFUSED_CODES = frozenset({"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken",
                           "ExpiredToken", "InvalidClientTokenId"})


@dataclass(frozen=True)
class S3Failure:
    """What went wrong with an S3 call, whoever made it (the callers word it)."""

    kind: S3FailureKind
    code: str
    """The server's error code (or its HTTP status); empty when no server answered."""
    detail: str
    """The server's message, or the client's own error text."""


@dataclass(frozen=True)
class S3Fields:
    """What one caller's messages name: the spec fields its user fixes, and how."""

    location: str
    """The field holding the bucket (and prefix)."""
    endpoint: str
    secret: str
    """The field naming the Secret with the keys."""
    owner: str
    """Whose Secret that is ("the dataset's")."""
    grants: str
    """The S3 actions the caller needs on the bucket."""
    again: str
    """What follows an object that changed under a copy."""


DATASET_FIELDS = S3Fields(
    "cache.datasets[].source", "cache.datasets[].endpoint",
    "cache.datasets[].credentialsSecret", "the dataset's", "s3:ListBucket and s3:GetObject",
    "run the warm-up again (complete objects are kept)")


def s3_failures() -> tuple[type[BaseException], ...]:
    """The exceptions an S3 call raises: botocore's, and the transfer manager's wrappers
    (upload_file turns a ClientError into S3UploadFailedError, a ranged download's 412
    into S3DownloadFailedError)."""
    from boto3.exceptions import Boto3Error
    from botocore.exceptions import BotoCoreError, ClientError
    from s3transfer.exceptions import (
        RetriesExceededError,
        S3DownloadFailedError,
        S3UploadFailedError,
    )

    return (BotoCoreError, ClientError, Boto3Error, RetriesExceededError,
            S3DownloadFailedError, S3UploadFailedError)


def _unwrapped(exc: BaseException) -> BaseException:
    """The botocore error under a transfer manager's wrapper (its cause, context or
    last_exception), else `exc` itself."""
    from botocore.exceptions import BotoCoreError, ClientError

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, BotoCoreError | ClientError):
            botocore_error: BaseException = current  # botocore is untyped: keep ours
            return botocore_error
        seen.add(id(current))
        last = getattr(current, "last_exception", None)
        current = (last if isinstance(last, BaseException)
                   else current.__cause__ or current.__context__)
    return exc


def classify(exc: BaseException, missing_is_bucket: bool = False) -> S3Failure:
    """Sort an S3 call's error. `missing_is_bucket`: a bare 404 (a HEAD's answer, which has
    no body and so no code) means the bucket, because the call named no key."""
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        PartialCredentialsError,
    )

    cause = _unwrapped(exc)
    if isinstance(cause, NoCredentialsError | PartialCredentialsError):
        return S3Failure("no-credentials", "", str(cause))
    if isinstance(cause, EndpointConnectionError):
        return S3Failure("unreachable", "", str(cause))
    if isinstance(cause, ClientError):
        err = cause.response.get("Error") or {}
        status = (cause.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        code = str(err.get("Code") or status or "")
        detail = str(err.get("Message") or cause)
        if code in REFUSED_CODES:
            return S3Failure("refused-credentials", code, detail)
        if code == "NoSuchBucket" or (code == "404" and missing_is_bucket):
            return S3Failure("no-bucket", code, detail)
        if code in ("AccessDenied", "403") or status == 403:
            return S3Failure("access-denied", code, detail)
        if code in ("PreconditionFailed", "412") or status == 412:
            return S3Failure("changed", code, detail)
        return S3Failure("other", code, detail)
    return S3Failure("other", "", f"{type(cause).__name__}: {cause}")


def explain(subject: str, bucket: str, exc: BaseException, fields: S3Fields,
            missing_is_bucket: bool = False) -> S3Error:
    """One line that says what went wrong, naming the caller's field to change."""
    failure = classify(exc, missing_is_bucket)
    where = f" at {_endpoint()}" if _endpoint() else ""
    match failure.kind:
        case "no-credentials":
            line = ("no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or "
                    f"AWS_PROFILE); in a stack, name {fields.owner} Secret in {fields.secret}")
        case "unreachable":
            line = (f"cannot reach the S3 server{where}: {failure.detail}; check "
                    f"AWS_ENDPOINT_URL ({fields.endpoint})")
        case "refused-credentials":
            line = (f"the S3 server{where} refused the credentials ({failure.code}); check "
                    f"AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY ({fields.owner} Secret, "
                    f"{fields.secret})")
        case "no-bucket":
            line = (f"no bucket {bucket!r} on the S3 server{where}; fix {fields.location} or "
                    "create the bucket")
        case "access-denied":
            line = (f"access denied to bucket {bucket!r}{where}; grant these credentials "
                    f"{fields.grants} on it")
        case "changed":
            line = f"an object changed while it was copied; {fields.again}"
        case _ if failure.code:
            line = f"the S3 server{where} answered {failure.code}: {failure.detail}"
        case _:
            line = failure.detail
    return S3Error(f"{subject}: {line}")


def _explain(source: str, exc: BaseException) -> S3Error:
    """A dataset read's error, as `--source` and the cache.datasets[] fields say it."""
    src = S3Source.parse(source)
    return explain(f"--source {source}", src.bucket, exc, DATASET_FIELDS,
                   missing_is_bucket=not src.prefix)


def _safe_rel(key: str, prefix: str) -> str | None:
    """The key's path under the dataset, or None for keys that are no file (`dir/`) or
    would leave the dataset directory (`..`)."""
    rel = key[len(prefix):].lstrip("/") if prefix else key
    if not rel or rel.endswith("/"):
        return None
    parts = PurePosixPath(rel).parts
    if any(p in ("..", ".") for p in parts) or rel.startswith("/"):
        return None
    if parts[-1].startswith(OWN) or parts[-1].endswith(PART_SUFFIX):
        return None
    return rel


def _list(client: Any, src: S3Source) -> list[S3Object]:
    """The objects of the dataset: those under `prefix/` (a folder-like prefix), or the
    one object named `prefix` when there are none."""
    folder = src.prefix if not src.prefix or src.prefix.endswith("/") else src.prefix + "/"
    found: list[S3Object] = []
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=src.bucket, Prefix=folder)
    for page in pages:
        for item in page.get("Contents") or []:
            rel = _safe_rel(str(item["Key"]), folder)
            if rel is not None:
                found.append(S3Object(str(item["Key"]), rel, int(item["Size"]),
                                      str(item.get("ETag", ""))))
    if found or not src.prefix or src.prefix.endswith("/"):
        return found
    from botocore.exceptions import ClientError

    try:
        head = client.head_object(Bucket=src.bucket, Key=src.prefix)
    except ClientError as exc:
        if str((exc.response.get("Error") or {}).get("Code")) in ("404", "NoSuchKey"):
            return []  # neither a folder nor an object: said as "no objects under"
        raise
    name = PurePosixPath(src.prefix).name
    return [S3Object(src.prefix, name, int(head["ContentLength"]), str(head.get("ETag", "")))]


def _journal(target: Path) -> dict[str, tuple[int, str]]:
    """What earlier runs completed: key -> (size, ETag)."""
    done: dict[str, tuple[int, str]] = {}
    try:
        lines = (target / JOURNAL).read_text().splitlines()
    except OSError:
        return done
    for line in lines:
        try:
            entry = json.loads(line)
            done[str(entry["key"])] = (int(entry["size"]), str(entry["etag"]))
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a kill
    return done


def _complete(target: Path, obj: S3Object, journal: dict[str, tuple[int, str]]) -> bool:
    if journal.get(obj.key) != (obj.size, obj.etag):
        return False
    try:
        return (target / obj.rel).stat().st_size == obj.size
    except OSError:
        return False


def _prune(target: Path, wanted: set[str]) -> None:
    """Remove files an earlier run left that are not (or no longer) in the listing."""
    for path in sorted(target.rglob("*"), reverse=True):
        rel = path.relative_to(target).as_posix()
        if path.is_file() and not rel.startswith(OWN) and rel not in wanted:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


class _Counter:
    """Bytes and objects done, shared by the download threads."""

    def __init__(self, total: int, objects: int, progress: Progress) -> None:
        self.lock = threading.Lock()
        self.bytes = 0
        self.objects = 0
        self.skipped = 0
        self.total, self.count, self.progress = total, objects, progress

    def detail(self) -> str:
        skipped = f", {self.skipped} already complete" if self.skipped else ""
        return f"{self.objects} of {self.count} objects{skipped}"

    def add(self, n: int, objects: int = 0, skipped: int = 0) -> None:
        with self.lock:
            self.bytes += n
            self.objects += objects
            self.skipped += skipped
            self.progress(self.bytes, self.total, self.detail())


def _download(client: Any, bucket: str, obj: S3Object, target: Path, counter: _Counter,
              journal_lock: threading.Lock, stop: threading.Event) -> None:
    dest = target / obj.rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + PART_SUFFIX)
    args: dict[str, Any] = {"Bucket": bucket, "Key": obj.key}
    if obj.etag:
        args["IfMatch"] = obj.etag
    body = client.get_object(**args)["Body"]
    got = 0
    try:
        with part.open("wb") as out:
            while chunk := body.read(CHUNK):
                if stop.is_set():
                    return  # another download failed: leave this one for the next run
                out.write(chunk)
                got += len(chunk)
                counter.add(len(chunk))
    finally:
        body.close()
    if got != obj.size:
        raise S3Error(f"s3://{bucket}/{obj.key}: got {got} of {obj.size} bytes; the "
                      "transfer was cut short, run the warm-up again")
    part.replace(dest)
    line = json.dumps({"key": obj.key, "size": obj.size, "etag": obj.etag})
    with journal_lock, (target / JOURNAL).open("a") as journal:
        journal.write(line + "\n")
        journal.flush()
    counter.add(0, objects=1)


def _each_done(futures: list[Future[None]]) -> Iterator[Future[None]]:
    pending = set(futures)
    while pending:
        done, pending = wait(pending, return_when=FIRST_EXCEPTION)
        yield from done


def fetch_s3(source: str, target: Path, progress: Progress, workers: int = DEFAULT_WORKERS,
             client_factory: Callable[[int], Any] = _client) -> int:
    """Copy every object of `source` into `target`, keeping what an earlier run completed
    there; return the dataset's bytes. The journal is removed once all objects are in."""
    from botocore.exceptions import BotoCoreError, ClientError

    src = S3Source.parse(source)
    try:
        client = client_factory(workers)
        objects = _list(client, src)
    except (BotoCoreError, ClientError) as exc:
        raise _explain(source, exc) from None
    if not objects:
        raise S3Error(f"--source {source}: no objects under s3://{src.bucket}/{src.prefix}; "
                      "fix cache.datasets[].source or upload the dataset")
    target.mkdir(parents=True, exist_ok=True)
    journal = _journal(target)
    _prune(target, {o.rel for o in objects})
    todo = [o for o in objects if not _complete(target, o, journal)]
    total = sum(o.size for o in objects)
    counter = _Counter(total, len(objects), progress)
    pending = {o.key for o in todo}
    kept = [o for o in objects if o.key not in pending]
    counter.add(sum(o.size for o in kept), objects=len(kept), skipped=len(kept))
    stop = threading.Event()
    journal_lock = threading.Lock()
    with ThreadPoolExecutor(max_workers=max(1, workers),
                            thread_name_prefix="s3-download") as pool:
        futures = [pool.submit(_download, client, src.bucket, obj, target, counter,
                               journal_lock, stop) for obj in todo]
        try:
            for future in _each_done(futures):
                future.result()
        except (BotoCoreError, ClientError) as exc:
            stop.set()
            for f in futures:
                f.cancel()
            raise _explain(source, exc) from None
        except BaseException:
            stop.set()
            for f in futures:
                f.cancel()
            raise
    (target / JOURNAL).unlink(missing_ok=True)
    return total


__all__ = ["DATASET_FIELDS", "JOURNAL", "REFUSED_CODES", "S3Error", "S3Failure", "S3FailureKind",
           "S3Fields", "S3Object", "S3Source", "classify", "explain", "fetch_s3", "s3_failures"]
