"""The one S3 error classifier and its wordings: each kind of failure, as botocore and the
transfer manager raise it, becomes one line naming the field of the caller's spec to fix
(cache.datasets[] for a warm-up, jobs[].checkpoint.mirror for the mirror and fetch).

Unit level: the errors are built as botocore builds them from a server's answer. The
kinds a real server produces are also checked against versitygw in test_s3_source.py and
test_checkpoint_mirror_errors.py; a changed object (412 under a ranged download) cannot
be timed there and is checked here only."""

from __future__ import annotations

import pytest
from boto3.exceptions import S3UploadFailedError
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
)
from s3transfer.exceptions import RetriesExceededError, S3DownloadFailedError

from trainmaster.datacache._checkpoint_mirror import FETCH_FIELDS, MIRROR_FIELDS
from trainmaster.datacache._s3 import DATASET_FIELDS, S3Error, _explain, classify, explain

ENDPOINT = "http://s3.storage.example:7070"


def _answer(code: str, status: int, message: str = "") -> ClientError:
    """A ClientError as botocore raises it for a server's error answer."""
    error = {"Code": code, "Message": message} if code else {}
    return ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": status}},
                       "ListObjectsV2")


def _wrapped_upload(cause: ClientError) -> S3UploadFailedError:
    """What boto3's upload_file raises for a ClientError: a wrapper, the answer as context."""
    try:
        raise cause
    except ClientError as exc:
        try:
            raise S3UploadFailedError(f"Failed to upload a to b: {exc}")
        except S3UploadFailedError as wrapper:
            return wrapper


def _changed_under_download() -> S3DownloadFailedError:
    """What s3transfer raises when a ranged GET's If-Match is refused (412)."""
    try:
        raise _answer("PreconditionFailed", 412, "At least one of the preconditions failed")
    except ClientError:
        try:
            raise S3DownloadFailedError("did not match expected ETag.")
        except S3DownloadFailedError as wrapper:
            return wrapper


@pytest.mark.parametrize(("exc", "kind", "code"), [
    (NoCredentialsError(), "no-credentials", ""),
    (PartialCredentialsError(provider="env", cred_var="AWS_SECRET_ACCESS_KEY"),
     "no-credentials", ""),
    (EndpointConnectionError(endpoint_url=ENDPOINT), "unreachable", ""),
    (_answer("SignatureDoesNotMatch", 403), "refused-credentials", "SignatureDoesNotMatch"),
    (_answer("InvalidAccessKeyId", 403), "refused-credentials", "InvalidAccessKeyId"),
    (_answer("ExpiredToken", 400), "refused-credentials", "ExpiredToken"),
    (_answer("NoSuchBucket", 404), "no-bucket", "NoSuchBucket"),
    (_answer("AccessDenied", 403), "access-denied", "AccessDenied"),
    (_answer("", 403), "access-denied", "403"),  # a HEAD's answer: no body, no code
    (_answer("PreconditionFailed", 412), "changed", "PreconditionFailed"),
    (_answer("SlowDown", 503), "other", "SlowDown"),
    (_answer("", 404), "other", "404"),  # a HEAD of a key: the object, not the bucket
    (_wrapped_upload(_answer("AccessDenied", 403)), "access-denied", "AccessDenied"),
    (_wrapped_upload(_answer("SignatureDoesNotMatch", 403)), "refused-credentials",
     "SignatureDoesNotMatch"),
    (_changed_under_download(), "changed", "PreconditionFailed"),
    (RetriesExceededError(EndpointConnectionError(endpoint_url=ENDPOINT)), "unreachable", ""),
    (ValueError("odd"), "other", ""),
])
def test_each_failure_is_sorted_by_what_the_user_fixes(exc: BaseException, kind: str,
                                                       code: str) -> None:
    failure = classify(exc)
    assert (failure.kind, failure.code) == (kind, code)


def test_a_bare_404_is_the_bucket_only_when_the_call_named_no_key() -> None:
    assert classify(_answer("", 404), missing_is_bucket=True).kind == "no-bucket"
    assert classify(_answer("", 404)).kind == "other"


def test_the_dataset_lines_name_the_cache_datasets_fields(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", ENDPOINT)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    source = "--source s3://corpus/wiki"

    def line(exc: BaseException) -> str:
        error = _explain("s3://corpus/wiki", exc)
        assert isinstance(error, S3Error)
        return str(error)

    assert line(NoCredentialsError()) == (
        f"{source}: no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or "
        "AWS_PROFILE); in a stack, name the dataset's Secret in "
        "cache.datasets[].credentialsSecret")
    assert line(_answer("SignatureDoesNotMatch", 403)) == (
        f"{source}: the S3 server at {ENDPOINT} refused the credentials "
        "(SignatureDoesNotMatch); check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (the "
        "dataset's Secret, cache.datasets[].credentialsSecret)")
    assert line(_answer("NoSuchBucket", 404)) == (
        f"{source}: no bucket 'corpus' on the S3 server at {ENDPOINT}; fix "
        "cache.datasets[].source or create the bucket")
    assert line(_answer("AccessDenied", 403)) == (
        f"{source}: access denied to bucket 'corpus' at {ENDPOINT}; grant these "
        "credentials s3:ListBucket and s3:GetObject on it")
    assert line(_answer("PreconditionFailed", 412)) == (
        f"{source}: an object changed while it was copied; run the warm-up again (complete "
        "objects are kept)")
    assert line(_answer("SlowDown", 503, "Reduce your request rate.")) == (
        f"{source}: the S3 server at {ENDPOINT} answered SlowDown: Reduce your request rate.")
    unreachable = line(EndpointConnectionError(endpoint_url=ENDPOINT))
    assert unreachable.startswith(f"{source}: cannot reach the S3 server at {ENDPOINT}: ")
    assert unreachable.endswith("; check AWS_ENDPOINT_URL (cache.datasets[].endpoint)")
    # With no prefix, a bare 404 can only be the bucket.
    assert "no bucket 'corpus'" in str(_explain("s3://corpus", _answer("", 404)))


URL = "s3://checkpoints/gpt"
MIRROR = "jobs[].checkpoint.mirror"


@pytest.mark.parametrize(("exc", "fetch_says", "mirror_says"), [
    (NoCredentialsError(),
     f"{URL}: no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or "
     f"AWS_PROFILE); in a stack, name the mirror's Secret in {MIRROR}.credentialsSecret",
     None),
    (_answer("InvalidAccessKeyId", 403),
     f"{URL}: the S3 server at {ENDPOINT} refused the credentials (InvalidAccessKeyId); "
     "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (the mirror's Secret, "
     f"{MIRROR}.credentialsSecret)", None),
    (_answer("NoSuchBucket", 404),
     f"{URL}: no bucket 'checkpoints' on the S3 server at {ENDPOINT}; fix {MIRROR}.url or "
     "create the bucket", None),
    (_wrapped_upload(_answer("AccessDenied", 403)),
     f"{URL}: access denied to bucket 'checkpoints' at {ENDPOINT}; grant these credentials "
     "s3:ListBucket and s3:GetObject on it",
     f"{URL}: access denied to bucket 'checkpoints' at {ENDPOINT}; grant these credentials "
     "s3:ListBucket, s3:GetObject, s3:PutObject and s3:DeleteObject on it"),
    (_changed_under_download(),
     f"{URL}: an object changed while it was copied; fetch again",
     f"{URL}: an object changed while it was copied; the mirror goes on with the next "
     "checkpoint"),
])
def test_the_mirror_and_fetch_lines_name_the_checkpoint_mirror_fields(
        monkeypatch: pytest.MonkeyPatch, exc: BaseException, fetch_says: str,
        mirror_says: str | None) -> None:
    """Refused credentials, access denied and a changed object fell through to a generic
    "answered CODE" line for the mirror before the classifier was shared."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", ENDPOINT)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    assert str(explain(URL, "checkpoints", exc, FETCH_FIELDS)) == fetch_says
    assert str(explain(URL, "checkpoints", exc, MIRROR_FIELDS)) == (mirror_says or fetch_says)
    assert "answered" not in fetch_says and "cache.datasets" not in fetch_says


def test_no_endpoint_set_leaves_the_server_unnamed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    said = str(explain(URL, "checkpoints", _answer("SlowDown", 503, "Slow down"), FETCH_FIELDS))
    assert said == f"{URL}: the S3 server answered SlowDown: Slow down"
    assert str(explain(URL, "checkpoints", ValueError("odd"), DATASET_FIELDS)) == (
        f"{URL}: ValueError: odd")
