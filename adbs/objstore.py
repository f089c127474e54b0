"""Object stores: URLs of buckets (s3://, gs://, ...) opened with pyarrow.fs, for results and the base-session cache.

Words, once each: a study's *storage* is where its results go (`--storage`: a folder or an object-store URL);
*Optuna's storage* is Optuna's database (`--optuna-storage`); an *object store* is a bucket service, and this
module is everything the platform does with its URLs.

Object-store URLs are the ones Ray Tune itself accepts as `storage_path` (it opens them with
`pyarrow.fs.FileSystem.from_uri`): s3://bucket/prefix, gs://bucket/prefix, hdfs://..., abfs://...
S3-compatible servers (MinIO, Ceph, ...) are reached through the URL's query string, which
pyarrow reads, e.g. ``s3://bucket/runs?endpoint_override=minio:9000&scheme=http``, or through
$AWS_ENDPOINT_URL. Credentials come from the usual environment variables / instance roles on
every node; a URL may also carry them (pyarrow accepts ``s3://KEY:SECRET@bucket``), so anything
printed or logged goes through `redact` (adbs/redaction.py: redact, the rule for every URL).
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from adbs.redaction import redact

# Schemes pyarrow.fs (Ray Tune's storage layer) opens as shared storage.
OBJECT_STORE_SCHEMES = ("s3", "gs", "gcs", "hdfs", "viewfs", "abfs", "abfss")


class ObjectStoreError(RuntimeError):
    """An object store that cannot be opened or used; the message says what to check."""


def scheme(uri: str) -> str:
    """URI scheme in lower case; '' for a plain path."""
    head, sep, _ = uri.partition("://")
    return head.lower() if sep else ""


def is_url(location: str) -> bool:
    """Whether `location` is an object-store URL rather than a folder path."""
    return scheme(str(location)) in OBJECT_STORE_SCHEMES


def join(url: str, *parts: str) -> str:
    """`url` with path parts appended before its query string (which holds e.g. endpoint_override)."""
    s = urlsplit(url)
    path = "/".join([s.path.rstrip("/"), *(p.strip("/") for p in parts if p)])
    return urlunsplit((s.scheme, s.netloc, path, s.query, ""))


def open_fs(url: str):
    """(pyarrow filesystem, path inside it) for an object-store URL; ObjectStoreError when it cannot be opened."""
    import pyarrow.fs as pafs

    try:
        return pafs.FileSystem.from_uri(url)
    except Exception as e:  # noqa: BLE001 - pyarrow raises ArrowInvalid / OSError with a reason
        raise ObjectStoreError(f"cannot open {redact(url)}: {redact(str(e))}. Check the URL (bucket, endpoint_override=HOST:PORT "
                           "and scheme=http for an S3-compatible server) and the credentials in this "
                           "environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, GOOGLE_APPLICATION_CREDENTIALS, ...)") from None


def check_writable(url: str) -> None:
    """Write, read back and delete a small object under `url`; ObjectStoreError with the reason when that fails."""
    import uuid

    fs, root = open_fs(url)
    probe = f"{root.rstrip('/')}/.adbs-write-check-{uuid.uuid4().hex}"
    token = uuid.uuid4().hex.encode()
    try:
        _ensure_bucket(fs, root)
        with fs.open_output_stream(probe) as f:
            f.write(token)
        with fs.open_input_stream(probe) as f:
            seen = f.read()
        fs.delete_file(probe)
    except Exception as e:  # noqa: BLE001
        raise ObjectStoreError(f"{redact(url)} is not writable from here: "
                               f"{redact(str(e)).strip().splitlines()[0][:300]}. "
                               "Check that the bucket exists, the credentials in this environment can write to it, "
                               "and the endpoint (endpoint_override / AWS_ENDPOINT_URL) is reachable") from None
    if seen != token:
        raise ObjectStoreError(f"{redact(url)}: an object written there read back with other content")


def _ensure_bucket(fs, root: str) -> None:
    """Object stores have no folders to create; only the bucket must exist (pyarrow creates it when allowed)."""
    import pyarrow.fs as pafs

    bucket = root.split("/", 1)[0]
    if fs.get_file_info(bucket).type == pafs.FileType.NotFound:
        fs.create_dir(bucket)  # raises with the store's reason when creating buckets is not allowed
