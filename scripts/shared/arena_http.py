# Shared by arena_cli.py, check_task.py and validation_gates.py: dev/assemble_scripts.py puts this file
# where a script says `# @include arena_http.py`, so that each served file stays one standalone download.

DEFAULT_URL = "https://openenvarena-arena.hf.space"
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
RETRY_STATUSES = {502, 503, 504}
RETRY_DELAYS_S = (1, 2, 4)


class CliError(Exception):
    """Ends the command with a message on stderr and an exit status."""

    def __init__(self, message, status=EXIT_ERROR, body=None):
        super().__init__(message)
        self.status = status
        self.body = body


def base_url():
    raw = os.environ.get("ARENA_URL", DEFAULT_URL).strip().rstrip("/")
    parsed = urllib.parse.urlsplit(raw)
    host = (parsed.hostname or "").lower()
    if parsed.scheme == "https" and host:
        return raw
    if parsed.scheme == "http" and host in LOCAL_HOSTS:
        return raw
    raise CliError(
        "ARENA_URL must be https://...; plain http:// is accepted only for 127.0.0.1, localhost and ::1",
        EXIT_USAGE,
    )


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuses every redirect: a request goes to the arena ARENA_URL names or nowhere (a token
    never follows one to another host)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise CliError("the arena answered a redirect (HTTP %d to %s); refusing to follow it" % (code, newurl))


_OPENER = urllib.request.build_opener(_NoRedirect())
# A loopback arena is reached directly, whatever proxy the environment names: a proxy would see
# the token in clear on plain HTTP.
_DIRECT_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


def _opener(url):
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return _DIRECT_OPENER
    try:
        return _DIRECT_OPENER if ipaddress.ip_address(host).is_loopback else _OPENER
    except ValueError:
        return _OPENER


def _try_json(raw):
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
