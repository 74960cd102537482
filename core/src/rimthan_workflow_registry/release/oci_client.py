"""The registry client: oras, with credentials and transport errors made Rimthan's own.

:func:`open_registry` gives an oras client for one registry, every request
under :mod:`.oci_bounds`, with credentials from the Docker config file or
``RIMTHAN_REGISTRY_USERNAME`` or ``_USERNAME_FILE`` with ``_PASSWORD`` or ``_PASSWORD_FILE`` (every
file read again at each call, so a follower sees a rotated credential at its
next refresh), answered to the registry's own
token or Basic challenge (never to a host a redirect led to, never in the
clear to a plain-HTTP token service). :func:`guarded` and
:func:`registry_call` turn what the client raises or the registry answers
into refusals with a code (``oci_unauthorized``, ``oci_tls_untrusted``,
``oci_registry_error``), never a traceback. The pull path (:mod:`.oci`) and
the packager's push use both.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import oras.auth
import oras.provider
import oras.utils
import requests
import urllib3.exceptions

from ..errors import FailureCode, RegistryError, quoted
from .oci_bounds import REQUEST_TIMEOUT, Origin, bound_session, challenged_by_registry, origin, upload_location

if TYPE_CHECKING:
    from .oci import OciReference

USERNAME_ENV = "RIMTHAN_REGISTRY_USERNAME"
PASSWORD_ENV = "RIMTHAN_REGISTRY_PASSWORD"
USERNAME_FILE_ENV = "RIMTHAN_REGISTRY_USERNAME_FILE"  # a mounted secret: read at every open_registry
PASSWORD_FILE_ENV = "RIMTHAN_REGISTRY_PASSWORD_FILE"  # a mounted secret that rotates: read at every open_registry
_SECRET_FILE_MAX = 64 * 1024  # a registry token is a few KiB; a file past this is not a password
# RecursionError: a tag page or token nested deeper than Python's JSON decoder recurses
_TRANSPORT_ERRORS = (requests.RequestException, ValueError, OSError, RecursionError)
# A registry that took the request and sent nothing back within the read timeout (wrapped by requests or not).
_READ_TIMEOUTS = (requests.exceptions.ReadTimeout, urllib3.exceptions.ReadTimeoutError)


def refusal(code: FailureCode, message: str, where: str | None = None) -> RegistryError:
    """A registry refusal: ``code``, what went wrong, and the reference (``where``)."""
    return RegistryError(code, message, path=where)


class _CredentialsMissing(Exception):
    """The registry asked for credentials and neither source holds any for it."""


class _CredentialsRefused(Exception):
    """The registry answered 401/403 inside an oras call that only raises a bare ``ValueError``."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class _TokenRefused(Exception):
    """The registry's token service gave no token for the credentials sent (wrong, expired or revoked)."""


class _PlainRealm(requests.RequestException):
    """A registry reached over TLS named a plain-HTTP token service (``oci_registry_error`` via ``guarded``)."""


class _ChallengeAuth(oras.auth.TokenAuth):  # type: ignore[misc]
    """oras's token flow, plus the Basic challenge an htpasswd-protected registry sends.

    oras answers every challenge by asking a token service, so a registry that
    wants HTTP Basic (the reference registry with htpasswd, many private
    registries) would never get the credentials it asks for. oras sends the
    credentials to whatever realm a Bearer challenge names: one on another
    host is the Docker token protocol (Docker Hub's is), but a TLS registry
    naming a plain-HTTP realm would have them sent in the clear, so it is refused.
    Only the registry's own challenge is answered: oras answered one from
    wherever a redirect led (a blob's storage), sending the credentials to
    the token service that host named.
    """

    home: Origin | None = None  # the registry's origin

    def authenticate_request(
        self, original: requests.Response, headers: dict[str, str], refresh: bool = False
    ) -> tuple[dict[str, str], bool]:
        challenged_by_registry(self.home, original)
        challenge = original.headers.get("Www-Authenticate", "")
        realm = oras.auth.utils.parse_auth_header(challenge).realm or ""
        if self.prefix == "https" and realm.lower().startswith("http://"):
            raise _PlainRealm(
                f"the registry's token service is plain HTTP; credentials are not sent in the clear ({quoted(realm)})"
            )
        if not challenge.lower().startswith("basic"):
            return super().authenticate_request(original, headers, refresh)  # type: ignore[no-any-return]
        basic = getattr(self, "_basic_auth", None)
        if not basic:
            raise _CredentialsMissing
        return {**headers, "Authorization": f"Basic {basic}"}, True

    def request_token(self, h: Any) -> str:
        """A token from the registry's token service for the credentials held, or the refusal in one line: oras
        logged "This endpoint requires a token..." at error and raised "Cannot respond to request for
        authentication." (``oci_registry_error``), for a token service refusing the credentials or getting none."""
        token = super().request_token(h)
        if token:
            return str(token)
        if not getattr(self, "_basic_auth", None):
            raise _CredentialsMissing
        raise _TokenRefused


class _Registry(oras.provider.Registry):  # type: ignore[misc]
    """The oras client without its multi-minute retry loop, and with bounded requests (:mod:`.oci_bounds`).

    A refresh that cannot reach the registry should fail fast and try again on
    the next refresh, never stall the server for minutes.
    """

    def do_request(self, *args: Any, **kwargs: Any) -> requests.Response:
        response = oras.provider.Registry.do_request.__wrapped__(self, *args, **kwargs)
        challenged_by_registry(self.auth.home, response)  # a redirect's target, not the registry, refused them
        return response  # type: ignore[no-any-return]

    _get_location = upload_location  # an upload session on another host is refused, never sent the blob

    def _check_200_response(self, response: requests.Response) -> None:
        if response.status_code in (401, 403):
            raise _CredentialsRefused(response.status_code)
        if response.status_code not in (200, 201, 202):  # oras logged the body at error and said "Issue with URL"
            raise _Unanswered(_status_text(response))


class _Unanswered(ValueError):  # a ValueError as oras raised: never an OSError a local_io would take for the disk
    """The registry answered a status other than 2xx (``oci_registry_error`` via ``guarded``)."""


def _status_text(response: requests.Response) -> str:
    """``the registry answered HTTP 404 (no such repository: ...)``: the status and the OCI error code it names."""
    try:
        errors = response.json().get("errors") or []
        codes = sorted({str(e.get("code")) for e in errors if isinstance(e, dict)})
    except (ValueError, AttributeError, TypeError):
        codes = []
    named = f" {quoted(', '.join(codes))}" if codes else ""
    unknown = "; nothing was pushed to it yet, or its name is misspelt" if "NAME_UNKNOWN" in codes else ""
    return f"the registry answered HTTP {response.status_code}{named}{unknown}"


def open_registry(ref: OciReference, *, plain_http: bool = False) -> oras.provider.Registry:
    """An oras client for ``ref``'s registry: TLS unless ``plain_http``; Docker config or env credentials."""
    registry = _Registry(hostname=ref.host, insecure=plain_http, tls_verify=True)
    bound_session(registry.session)
    registry.auth = _ChallengeAuth()
    registry.auth.session, registry.auth.prefix, registry.auth._tls_verify = registry.session, registry.prefix, True
    registry.auth.home = origin(f"{registry.prefix}://{ref.host}")
    _load_docker_configs(registry, ref)
    given = _environment_credentials(ref)
    if given is not None:
        registry.auth.set_basic_auth(*given)
    return registry


def _environment_credentials(ref: OciReference) -> tuple[str, str] | None:
    """The user name and the password from the environment, each given as a variable or as a file read now.

    ``RIMTHAN_REGISTRY_USERNAME`` or ``_USERNAME_FILE``, with ``_PASSWORD`` or
    ``_PASSWORD_FILE``. A file is read at every call (every pull, push and
    follower sync), so a secret mounted as a file and rotated in place is used
    from the next refresh on; an environment variable stays what the process
    started with. A variable set beside its file, and a user name or a
    password given alone, are refused rather than guessed at.
    """
    user = _one_source(USERNAME_ENV, USERNAME_FILE_ENV, ref)
    password = _one_source(PASSWORD_ENV, PASSWORD_FILE_ENV, ref)
    if user is None and password is None:
        return None
    if user is None or password is None:  # (half set: the Docker config's credentials would be used without a word)
        given = next(source[0] for source in (user, password) if source is not None)
        missing = PASSWORD_ENV if user is not None else USERNAME_ENV
        raise refusal(
            FailureCode.OCI_UNAUTHORIZED,
            f"{given} is set but {missing} is not; set both (or neither, to use the Docker config's), "
            f"the {'password' if user is not None else 'user name'} as {missing} or {missing}_FILE",
            str(ref),
        )
    return user[1](), password[1]()


def _one_source(variable: str, file_variable: str, ref: OciReference) -> tuple[str, Callable[[], str]] | None:
    """Which of ``variable`` and ``file_variable`` is set (its name), and how to read its value; both set: refused.

    The file is read only once both halves of the credentials are known to be given, so a half-set pair is said
    as that, not as a file that cannot be read.
    """
    value, named = os.environ.get(variable), os.environ.get(file_variable)
    if value and named:
        raise refusal(FailureCode.OCI_UNAUTHORIZED, f"both {variable} and {file_variable} are set; set one", str(ref))
    if named:
        return file_variable, lambda: _read_secret_file(Path(named), file_variable, ref)
    return (variable, lambda: value) if value else None


_SECRET_WHAT = {USERNAME_FILE_ENV: "user name", PASSWORD_FILE_ENV: "password"}


def _read_secret_file(path: Path, variable: str, ref: OciReference) -> str:
    """The user name or password in ``path``, its one trailing newline dropped (as ``docker login
    --password-stdin`` does)."""
    what = _SECRET_WHAT[variable]

    def unusable(why: str) -> RegistryError:
        return refusal(FailureCode.OCI_UNAUTHORIZED, f"the {what} file {path} ({variable}) {why}", str(ref))

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO there must not hold the sync
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise unusable("is not a regular file")
            data = file.read(_SECRET_FILE_MAX + 1)
    except OSError as exc:
        raise unusable(f"cannot be read ({quoted(exc.strerror or exc)})") from None
    if len(data) > _SECRET_FILE_MAX:
        raise unusable(f"holds more than {_SECRET_FILE_MAX} bytes; it is not a {what}")
    try:
        secret = data.decode("utf-8").removesuffix("\n").removesuffix("\r")
    except UnicodeDecodeError:
        raise unusable("is not UTF-8 text") from None
    if not secret:
        raise unusable("is empty")
    return secret


def _load_docker_configs(registry: oras.provider.Registry, ref: OciReference) -> None:
    """The registry's credentials from ``$DOCKER_CONFIG/config.json`` and ``~/.docker/config.json``, if any.

    oras reads them as it finds them: a file that is not JSON, or holds a list
    where it expects an object, raised ``JSONDecodeError`` or ``AttributeError``
    from ``rimthan-pack pull``/``push`` and ``rimthan-mcp serve --releases-from``.
    """
    docker_config = Path(os.environ.get("DOCKER_CONFIG") or "/nonexistent") / "config.json"
    configs = [str(docker_config)] if docker_config.is_file() else None  # oras itself reads ~/.docker only
    try:
        registry.auth.load_configs(registry.get_container(ref.target), configs)
    except (ValueError, AttributeError, TypeError, OSError) as exc:
        files = " or ".join(sorted({*(configs or []), oras.utils.find_docker_config() or ""} - {""}))
        raise refusal(
            FailureCode.OCI_UNAUTHORIZED,
            f"the Docker config file {files} is not a readable credentials file ({type(exc).__name__}: {exc})",
            str(ref),
        ) from None


def registry_call(ref: OciReference, what: str, response: requests.Response, ok: tuple[int, ...] = (200,)) -> None:
    """Refuse a registry answer that is not one of ``ok`` (``oci_unauthorized`` for 401/403)."""
    if response.status_code in (401, 403) and response.status_code not in ok:
        raise refusal(
            FailureCode.OCI_UNAUTHORIZED,
            f"{what}: the registry refused the credentials (HTTP {response.status_code})",
            str(ref),
        )
    if response.status_code not in ok:
        raise refusal(
            FailureCode.OCI_REGISTRY_ERROR, f"{what}: the registry answered HTTP {response.status_code}", str(ref)
        )


@contextlib.contextmanager
def guarded(ref: OciReference, what: str) -> Iterator[None]:
    """Turn the client's transport errors into refusals with a code (never a traceback)."""
    try:
        yield
    except RegistryError:
        raise
    except _CredentialsMissing:
        raise refusal(
            FailureCode.OCI_UNAUTHORIZED, f"{what}: the registry asks for credentials; none found", str(ref)
        ) from None
    except _TokenRefused:
        raise refusal(
            FailureCode.OCI_UNAUTHORIZED, f"{what}: the registry's token service refused the credentials", str(ref)
        ) from None
    except _CredentialsRefused as exc:
        raise refusal(
            FailureCode.OCI_UNAUTHORIZED, f"{what}: the registry refused the credentials (HTTP {exc.status})", str(ref)
        ) from None
    except requests.exceptions.SSLError as exc:
        raise _tls_refusal(exc, what, str(ref)) from None
    except json.JSONDecodeError:  # the decoder's "Expecting value: line 1 column 1 (char 0)" names no culprit
        raise refusal(FailureCode.OCI_REGISTRY_ERROR, f"{what}: the registry's answer is not JSON", str(ref)) from None
    except (requests.exceptions.ConnectionError, requests.exceptions.ReadTimeout) as exc:
        if any(isinstance(link, _READ_TIMEOUTS) for link in _chain(exc)):  # it quoted the pool: "_HTTPPool(host=..."
            said = f"{what}: the registry did not answer within {REQUEST_TIMEOUT:g} s (read timeout)"
            raise refusal(FailureCode.OCI_REGISTRY_ERROR, said, str(ref)) from None
        raise refusal(  # urllib3's pool and retry text says nothing to an operator
            FailureCode.OCI_REGISTRY_ERROR, f"{what}: no connection to the registry ({_cause(exc)})", str(ref)
        ) from None
    except _TRANSPORT_ERRORS as exc:
        raise refusal(FailureCode.OCI_REGISTRY_ERROR, f"{what}: {quoted(exc)}", str(ref)) from None


# What OpenSSL says when the other end answers the TLS hello in plain HTTP.
_NOT_TLS = ("WRONG_VERSION_NUMBER", "record layer failure", "UNKNOWN_PROTOCOL", "http request")


def _tls_refusal(exc: requests.exceptions.SSLError, what: str, where: str) -> RegistryError:
    """An untrusted certificate, a registry that speaks plain HTTP, or another handshake failure, in one line."""
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return refusal(
            FailureCode.OCI_TLS_UNTRUSTED,
            f"{what}: the registry's TLS certificate did not verify against the trusted CAs",
            where,
        )
    if any(sign in text for sign in _NOT_TLS):
        return refusal(
            FailureCode.OCI_REGISTRY_ERROR,
            f"{what}: the registry did not answer in TLS (it may serve plain HTTP)",
            where,
        )
    return refusal(FailureCode.OCI_REGISTRY_ERROR, f"{what}: the TLS handshake failed ({_cause(exc)})", where)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the errors it wraps, outermost first (requests -> urllib3 MaxRetryError -> ... -> OSError)."""
    chain = [exc]
    for _ in range(8):  # a few deep at most
        inner = chain[-1]
        nested = [
            a for a in (*inner.args, getattr(inner, "reason", None), inner.__cause__) if isinstance(a, BaseException)
        ]
        if not nested:
            break
        chain.append(nested[0])
    return chain


def _cause(exc: BaseException) -> str:
    """The innermost reason under ``exc`` ("Connection refused", "timed out"), not the wrappers' text around it."""
    inner = _chain(exc)[-1]
    text = inner.strerror if isinstance(inner, OSError) and inner.strerror else str(inner)
    return quoted(text) if text else type(inner).__name__
