"""Table locations as fsspec takes them: plain paths, file URIs, protocol URLs and chained URLs,
and the package error a filesystem that cannot be opened becomes (so a typo, a missing archive and
an unreachable host read differently)."""

from __future__ import annotations

import os
import posixpath
import re
from typing import Any
from urllib.parse import unquote, urlsplit

from ..errors import ArgumentError, DeltaError, StorageError, TableNotFoundError
from .handles import refused_option


def _split_uri(uri: str) -> tuple[str, str]:
    """Return (protocol, path-without-protocol) for a path or URI.

    Non-file URLs keep everything after ``protocol://`` (fsspec treats '#' and '?' as path
    characters); file URIs follow RFC 8089: percent-decoded, no host other than localhost."""
    if uri.split(":", 1)[0].lower() in ("file", "local") and ("#" in uri or "?" in uri):
        # RFC 8089 would drop a fragment or query silently, and read another folder than the
        # name says ("file:///x/t#v2" is /x/t); a '#' or '?' in a folder name is written %23, %3F
        raise ArgumentError(
            f"{uri!r}: a file URI cannot have a '#' fragment or '?' query; write '#' as %23 and '?' "
            "as %3F, or give a plain path"
        )
    if uri.split(":", 1)[0].lower() in ("file", "local") and any(c in uri for c in "\t\r\n"):
        # URL parsing deletes tabs and line breaks: "file:///x/a\nb" would read /x/ab
        raise ArgumentError(f"{uri!r}: a file URI cannot hold a tab or line break; give a plain path")
    if "://" not in uri:
        if uri[:5].lower() == "file:":
            path = unquote(uri[5:]) or "/"
            if not path.startswith("/"):
                raise ArgumentError(f"{uri!r}: a file URI needs an absolute path (file:///abs/path)")
            return "file", _no_nul(uri, path)
        return "file", os.path.abspath(os.path.expanduser(uri))
    scheme, rest = uri.split("://", 1)
    protocol = scheme.lower()
    if protocol in ("file", "local"):
        parts = urlsplit(uri)
        if parts.netloc not in ("", "localhost"):
            raise ArgumentError(
                f"{uri!r}: file URIs with a host ({parts.netloc!r}) are not supported; "
                f"write file:///absolute/path or a plain path"
            )
        return "file", _no_nul(uri, unquote(parts.path) or "/")
    return protocol, rest.rstrip("/")


def normalized_path(path: str) -> str:
    """``path`` with its '.' and '..' segments and doubled slashes folded, as posixpath.normpath
    does, but a URL's ``scheme://host`` kept whole: normpath folds its '//' (``http:/host/t``,
    a file no store has), and a '..' must not climb into the host."""
    if "://" not in path:
        return posixpath.normpath(path)
    scheme, rest = path.split("://", 1)
    host, _, tail = rest.partition("/")
    return f"{scheme}://{host}" + posixpath.normpath("/" + tail.lstrip("/"))


def _no_nul(uri: str, path: str) -> str:
    """A file URI's decoded ``path``; a NUL (``%00``) is refused as in a plain path (the
    filesystem calls would fail with a bare ValueError)."""
    if "\x00" in path:
        raise ArgumentError(f"table URI {uri!r} contains a NUL character (%00)")
    return path


_PROTOCOL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*$")


def _is_chained(uri: str) -> bool:
    """An fsspec chained URL (``simplecache::s3://b/t``, ``zip://t::file:///a.zip``): its first
    link starts with a protocol. A local folder may have '::' in its name (``/x/a::b``)."""
    if "::" not in uri:
        return False
    first = uri.split("::", 1)[0]
    return bool(_PROTOCOL.match(first.split("://", 1)[0])) and (
        "://" in first or first.lower() in _fsspec_protocols()
    )


def _fsspec_protocols() -> frozenset[str]:
    import fsspec

    return frozenset(p.lower() for p in fsspec.available_protocols())


def _chain_child(uri: str, name: str) -> str:
    """A chained fsspec URL (``simplecache::s3://b/t``, ``zip://t::file:///a.zip``) for ``name``
    below its root: the path lives in the first link that has one."""
    links = uri.split("::")
    for i, link in enumerate(links):
        if "://" in link:
            protocol, path = link.split("://", 1)
            links[i] = f"{protocol}://{path.rstrip('/') + '/' if path.rstrip('/') else ''}{name}"
            return "::".join(links)
    raise DeltaError(f"{uri!r}: no link of this chained URL names a path")


#: OSErrors about a path, not the network: opening a filesystem with them is a DeltaError.
_PATH_ERRORS = (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError)


def _open_error(uri: str, e: Exception, options: dict[str, Any], fs_class: Any = None) -> DeltaError:
    """A filesystem that could not be opened: a StorageError when the store could not be reached
    (FTP connects on opening; a retry may succeed): refused, timed out, but also a host name that
    does not resolve (socket.gaierror) or no route to it, OSErrors that are not ConnectionErrors;
    a TableNotFoundError when what it opens is not there (a zip archive); else a DeltaError
    (options, auth, protocol, a missing key or credentials file); an ArgumentError when it
    refused a storage option."""
    refused = refused_option(e, options, fs_class)
    if refused is not None:
        return ArgumentError(
            f"cannot open filesystem for {uri!r}: it does not take the storage option {refused} "
            f"({type(e).__name__}: {e})"
        )
    network = isinstance(e, OSError) and not isinstance(e, _PATH_ERRORS)
    missing = isinstance(e, FileNotFoundError) and _names_location(e, uri, options)
    cls = StorageError if network else TableNotFoundError if missing else DeltaError
    what = " (so there is no table there)" if missing else ""
    return cls(f"cannot open filesystem for {uri!r}{what}: {type(e).__name__}: {e}")


def _names_location(e: FileNotFoundError, uri: str, options: dict[str, Any]) -> bool:
    """Whether the missing file is the location opened (an archive named in the URL or by an
    ``fo`` option), not a file another option names (a key file: the store's error, not "no
    table there")."""
    if e.filename is None:
        return False
    archives = [options.get("fo")] + [v.get("fo") for v in options.values() if isinstance(v, dict)]
    return str(e.filename) in uri or str(e.filename) in {str(a) for a in archives if a is not None}


def _check_url_options(uri: str, url_options: dict[str, Any], options: dict[str, Any], env: Any) -> None:
    """Refuse storage options that name another store than the URL: the filesystem takes the
    option (an FTP ``host``, an Azure ``account_name``), and adlfs takes the account of a
    connection string (the option, else ``AZURE_STORAGE_CONNECTION_STRING`` in ``env``) over the
    URL's, so ``abfss://c@one.dfs.core.windows.net/t`` would read another account's table."""
    for key, value in url_options.items():
        given = options.get(key)
        if given is not None and not _same_option(key, given, value, uri):
            shown = "" if key in _SECRET_KEYS else f" {given!r}, the URL {value!r}"
            raise ArgumentError(
                f"{uri!r}: storage option {key!r} names another store than the URL (option{shown}); "
                "give one of them, or the same in both"
            )
    # the account_name option counts too: adlfs takes a connection string over it as well
    account = url_options.get("account_name") or options.get("account_name")
    text = options.get("connection_string") or env.get("AZURE_STORAGE_CONNECTION_STRING")
    other = _connection_account(text) if account and isinstance(text, str) else None
    if other is not None and other.lower() != str(account).lower():
        source = "storage option" if options.get("connection_string") else "AZURE_STORAGE_CONNECTION_STRING"
        named = "" if url_options.get("account_name") else " (storage option account_name)"
        raise ArgumentError(
            f"{uri!r} names the Azure account {account!r}{named}, but the connection_string ({source}) "
            f"names {other!r}, whose container the filesystem would read instead; give a connection "
            "string of that account, or no account besides it (az://container/path)"
        )


#: URL-given options whose values a message never shows (a gist URL's password is its token).
_SECRET_KEYS = frozenset({"password", "token"})
#: URL-given options that are user names or passwords: percent-encoded in a URL (fsspec hands on
#: ``us%40er``), and compared exactly (``Alice`` and ``alice`` may be two users, two home folders).
_LOGIN_KEYS = frozenset({"username", "user", "password", "token"})


def _same_option(key: str, given: Any, value: Any, uri: str) -> bool:
    """Whether an option says what the URL does: a host whatever its case, IPv6 brackets or
    fsspec's misparse of them (without a port, fsspec cuts an IPv6 host at its last colon, and a
    bracketed host cannot be connected to: a bare ``host`` option names such a server); a login
    as written or percent-decoded;
    anything else (ports, flags, accounts) as text, whatever its case (SQL options are strings)."""
    text, said = str(given), str(value)
    if key in _LOGIN_KEYS:
        return text in (said, unquote(said))
    if key == "host":
        try:
            parsed = urlsplit(uri).hostname or ""  # lower case, no brackets
        except ValueError:  # not a URL urllib parses (a filesystem's own form)
            parsed = ""
        return text.strip("[]").lower() in {said.strip("[]").lower(), parsed}
    return text.lower() == said.lower()


#: The storage emulator's one account (``UseDevelopmentStorage=true``, Azurite).
_EMULATOR_ACCOUNT = "devstoreaccount1"


def _connection_account(text: str) -> str | None:
    """The account an Azure connection string names, as azure-storage-blob reads it: the
    emulator's for ``UseDevelopmentStorage=true``, its AccountName, else the first label of its
    blob endpoint's host (``acct.blob.core.windows.net``) or, on a local emulator's endpoint
    (``http://127.0.0.1:10000/devstoreaccount1``), its path; None when it names none."""
    fields = {k.strip().lower(): v.strip() for k, _, v in (p.partition("=") for p in text.split(";"))}
    if fields.get("usedevelopmentstorage") == "true":  # the library ignores every other field
        return _EMULATOR_ACCOUNT
    if fields.get("accountname"):
        return fields["accountname"]
    try:
        endpoint = urlsplit(fields.get("blobendpoint", ""))
        host = endpoint.hostname or ""
    except ValueError:  # not a URL: the library refuses it itself
        return None
    if host in ("127.0.0.1", "localhost"):
        return endpoint.path.strip("/") or None
    match = re.match(r"([^.]+)\.blob\.", host)
    return match.group(1) if match else None
