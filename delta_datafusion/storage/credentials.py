"""A store that found no credentials at all, told apart from one that refused them: the fix for
a public bucket is an option (``anon``), which the store's own error does not mention."""

from __future__ import annotations

_ANON = (
    "a public {where} is read without credentials with the storage option anon=True "
    "(storage_options={{'anon': True}}, OPTIONS ('anon' 'true') in SQL, --option anon=true on the "
    "command line)"
)


def _is(e: BaseException, module: str, name: str) -> bool:
    """Whether ``e`` is (a subclass of) ``module.name``, without importing that library."""
    return any(c.__module__ == module and c.__name__ == name for c in type(e).__mro__)


def no_credentials_hint(e: BaseException) -> str | None:
    """What to do about ``e`` when it says the store's client found no credentials, else None.
    botocore (s3fs) raises NoCredentialsError at the first request; adlfs without a key, token or
    ``anon`` asks azure-identity's DefaultAzureCredential, which fails the request when none of its
    sources has one. gcsfs falls back to anonymous access by itself."""
    if _is(e, "botocore.exceptions", "NoCredentialsError"):
        return (
            f"no AWS credentials found: {_ANON.format(where='bucket')}; else give the key and secret "
            "options or set AWS credentials (environment, ~/.aws)"
        )
    if _is(e, "azure.core.exceptions", "ClientAuthenticationError") and str(e).startswith(
        "DefaultAzureCredential failed"
    ):
        return (
            f"no Azure credential found: {_ANON.format(where='container')}; else give account_key, "
            "sas_token or connection_string, or sign in (az login, environment)"
        )
    return None
