#!/usr/bin/env python3
"""An anonymous bearer-token service for a real CNCF distribution registry (`auth: token`), as
Docker Hub's auth.docker.io and GHCR's /token play it: `GET /token?service=S&scope=repository:R:pull`
answers 200 `{"token", "access_token", "expires_in", "issued_at"}` with no credentials asked.

Standard library only. The RSA key and its self-signed certificate are made once with the openssl
CLI (start.sh does it); the token is signed here, RS256 (PKCS#1 v1.5 over SHA-256, computed with
`pow`). The registry finds the signing key by the token header's `x5c` (the certificate, verified
against `rootcertbundle`; what Docker Hub sends) or, with `--key-id`, by `kid`, the libtrust key id
of the certificate's key (looked up among the keys of `rootcertbundle`).

Policy (a test registry, loopback only): pull is granted on every repository, anonymously; push and
delete to the Basic credentials of `--push-credentials USER:PASS` (skopeo `--dest-creds`), or to
anyone with `--grant-push`; other credentials get 401. A repository named by `--deny` gets a token
with no access at all (except for the push credentials: it is "private"), which is what Docker Hub hands out for a private or missing repository (the
registry then answers 401 `insufficient_scope`). Each token request is logged as one JSON line on
stderr.

With `--proxy-port-file`, every other path (`/v2/…`) is passed through to the registry, so the same
registry answers on two origins: its own port, where the realm is on another origin (Docker Hub:
registry-1.docker.io → auth.docker.io), and this server's port, where the realm is on the registry's
own origin (GHCR: ghcr.io → ghcr.io/token).

    token-server.py --key key.pem --port 0 --port-file token.port \
        --service registry.test --issuer arena-test-token [--push-credentials arena:arena] \
        [--grant-push] [--deny arena/private] [--key-id]
"""

import argparse
import base64
import datetime
import hashlib
import http.client
import json
import os
import re
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


# --- DER, just enough to read an RSA private key and write a public one -------------------------

def der_read(buf, pos):
    """One TLV at `pos`: (tag, value bytes, position after it)."""
    tag = buf[pos]
    length = buf[pos + 1]
    pos += 2
    if length & 0x80:
        n = length & 0x7F
        length = int.from_bytes(buf[pos:pos + n], "big")
        pos += n
    return tag, buf[pos:pos + length], pos + length


def der_items(value):
    pos, out = 0, []
    while pos < len(value):
        tag, v, pos = der_read(value, pos)
        out.append((tag, v))
    return out


def der(tag, body):
    n = len(body)
    if n < 0x80:
        head = bytes([n])
    else:
        raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
        head = bytes([0x80 | len(raw)]) + raw
    return bytes([tag]) + head + body


def der_int(i):
    raw = i.to_bytes(i.bit_length() // 8 + 1, "big")  # a leading zero keeps it positive
    while len(raw) > 1 and raw[0] == 0 and raw[1] < 0x80:
        raw = raw[1:]
    return der(0x02, raw)


RSA_OID = bytes.fromhex("2a864886f70d010101")


def read_rsa_key(pem_text):
    """(n, e, d) from a PKCS#1 (`BEGIN RSA PRIVATE KEY`) or PKCS#8 (`BEGIN PRIVATE KEY`) PEM."""
    m = re.search(r"-----BEGIN (RSA )?PRIVATE KEY-----(.*?)-----END", pem_text, re.S)
    if not m:
        sys.exit("token-server: the key is not an unencrypted RSA private key in PEM")
    body = base64.b64decode("".join(m.group(2).split()))
    _, seq, _ = der_read(body, 0)
    items = der_items(seq)
    if not m.group(1):  # PKCS#8: version, algorithm, OCTET STRING holding the PKCS#1 key
        if RSA_OID not in items[1][1]:
            sys.exit("token-server: only RSA keys are supported")
        _, seq, _ = der_read(items[2][1], 0)
        items = der_items(seq)
    n, e, d = (int.from_bytes(items[i][1], "big") for i in (1, 2, 3))
    return n, e, d


def spki_der(n, e):
    """SubjectPublicKeyInfo of an RSA key, as Go's x509.MarshalPKIXPublicKey writes it."""
    algorithm = der(0x30, der(0x06, RSA_OID) + b"\x05\x00")
    key = der(0x30, der_int(n) + der_int(e))
    return der(0x30, algorithm + der(0x03, b"\x00" + key))


def libtrust_key_id(spki):
    """docker/libtrust's KeyID: base32 of the first 240 bits of SHA-256(SPKI), in groups of 4."""
    b32 = base64.b32encode(hashlib.sha256(spki).digest()[:30]).decode().rstrip("=")
    return ":".join(b32[i:i + 4] for i in range(0, len(b32), 4))


def read_cert_der(pem_text):
    m = re.search(r"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", pem_text, re.S)
    if not m:
        sys.exit("token-server: no certificate in the --cert file")
    return base64.b64decode("".join(m.group(1).split()))


SHA256_DIGEST_INFO = bytes.fromhex("3031300d060960864801650304020105000420")


def rs256(message, n, d):
    k = (n.bit_length() + 7) // 8
    t = SHA256_DIGEST_INFO + hashlib.sha256(message).digest()
    em = b"\x00\x01" + b"\xff" * (k - len(t) - 3) + b"\x00" + t
    return pow(int.from_bytes(em, "big"), d, n).to_bytes(k, "big")


def b64url(raw):
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
              "transfer-encoding", "upgrade"}


# --- the service ---------------------------------------------------------------------------------

def parse_scopes(values):
    """`repository:NAME:ACTIONS` (several per parameter, space-separated) → [(type, name, [actions])]."""
    out = []
    for value in values:
        for scope in value.split():
            parts = scope.split(":")
            if len(parts) < 3:
                continue
            kind, name, actions = parts[0], ":".join(parts[1:-1]), parts[-1]
            out.append((kind, name, [a for a in actions.split(",") if a]))
    return out


class Tokens:
    def __init__(self, args):
        with open(args.key) as f:
            self.n, self.e, self.d = read_rsa_key(f.read())
        self.header = {"typ": "JWT", "alg": "RS256"}
        if args.key_id:
            self.header["kid"] = libtrust_key_id(spki_der(self.n, self.e))
        else:
            with open(args.cert) as f:
                self.header["x5c"] = [base64.b64encode(read_cert_der(f.read())).decode()]
        self.args = args
        self.count = 0
        self.lock = threading.Lock()

    def grant(self, kind, name, actions, pusher):
        if kind != "repository" or (name in self.args.deny and not pusher):
            return []
        allowed = {"pull"} | ({"push", "delete", "*"} if self.args.grant_push or pusher else set())
        return [a for a in actions if a in allowed]

    def pusher(self, authorization):
        """Whether the request carries `--push-credentials` as Basic auth."""
        if not self.args.push_credentials or not authorization.startswith("Basic "):
            return False
        try:
            return base64.b64decode(authorization[6:].strip()).decode() == self.args.push_credentials
        except ValueError:
            return False

    def issue(self, scopes, subject, pusher=False):
        now = int(time.time())
        with self.lock:
            self.count += 1
            jti = f"{now}-{os.getpid()}-{self.count}"
        access = [{"type": k, "name": n, "actions": self.grant(k, n, a, pusher)} for k, n, a in scopes]
        claims = {
            "iss": self.args.issuer,
            "sub": subject,
            "aud": self.args.service,
            "exp": now + self.args.expires_in,
            "nbf": now - 1,
            "iat": now,
            "jti": jti,
            "access": access,
        }
        signing_input = (
            b64url(json.dumps(self.header, separators=(",", ":")).encode())
            + "."
            + b64url(json.dumps(claims, separators=(",", ":")).encode())
        )
        token = signing_input + "." + b64url(rs256(signing_input.encode(), self.n, self.d))
        issued = datetime.datetime.fromtimestamp(now, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return token, access, issued


class Handler(BaseHTTPRequestHandler):
    """The token route, `/healthz`, and (with `--proxy-port-file`) the registry behind it; `tokens`
    is set by `handler_for`."""

    protocol_version = "HTTP/1.1"
    tokens: "Tokens"

    def answer(self, status, body):
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def proxy(self):
        """Everything but the token route, passed to the registry: the registry then sits on the
        token realm's own origin, as GHCR does (ghcr.io/token)."""
        try:
            with open(self.tokens.args.proxy_port_file) as f:
                port = int(f.read().strip())
        except (OSError, ValueError):
            return self.answer(502, {"errors": [{"code": "UNAVAILABLE", "message": "no registry yet"}]})
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        upstream = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            r = upstream.getresponse()
            self.send_response(r.status)
            length = r.getheader("Content-Length")
            data = None if length is not None or self.command == "HEAD" else r.read()
            for k, v in r.getheaders():
                if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            self.send_header("Content-Length", length if length is not None else str(len(data or b"")))
            self.end_headers()
            if self.command == "HEAD":
                return
            if data is not None:
                self.wfile.write(data)
            else:
                while chunk := r.read(1 << 16):
                    self.wfile.write(chunk)
        except OSError as e:
            self.answer(502, {"errors": [{"code": "UNAVAILABLE", "message": str(e)}]})
        finally:
            upstream.close()

    def do_HEAD(self):
        if self.tokens.args.proxy_port_file:
            return self.proxy()
        self.answer(405, {})

    def do_PUT(self):
        return self.do_HEAD()

    do_POST = do_PATCH = do_DELETE = do_PUT

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(url.query)
        if url.path == "/healthz":
            return self.answer(200, {"ok": True})
        if url.path != self.tokens.args.path:
            if self.tokens.args.proxy_port_file:
                return self.proxy()
            return self.answer(404, {"errors": [{"code": "NOT_FOUND", "message": "no such route"}]})
        service = q.get("service", [self.tokens.args.service])[0]
        if service != self.tokens.args.service:
            return self.answer(400, {"errors": [{"code": "DENIED", "message": f"unknown service {service}"}]})
        scopes = parse_scopes(q.get("scope", []))
        authorization = self.headers.get("Authorization", "")
        if authorization and not self.tokens.pusher(authorization) and not self.tokens.args.accept_any_credentials:
            # Docker Hub answers wrong credentials with 401, not with an anonymous token.
            return self.answer(401, {"details": "incorrect username or password"})
        pusher = self.tokens.pusher(authorization)
        subject = self.tokens.args.push_credentials.split(":")[0] if pusher else ""
        token, access, issued = self.tokens.issue(scopes, subject, pusher)
        log = {"service": service, "scope": q.get("scope", []), "granted": access,
               "credentials": bool(authorization), "pusher": pusher}
        sys.stderr.write(json.dumps(log) + "\n")
        sys.stderr.flush()
        fields = {"both": ("token", "access_token"), "token": ("token",),
                  "access_token": ("access_token",)}[self.tokens.args.fields]
        self.answer(200, {**{f: token for f in fields},
                          "expires_in": self.tokens.args.expires_in, "issued_at": issued})

    def log_message(self, *a):
        pass


def handler_for(tokens):
    return type("Handler", (Handler,), {"tokens": tokens})


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--key", required=True, help="RSA private key (PEM)")
    p.add_argument("--cert", help="its certificate (PEM), sent as x5c; needed unless --key-id")
    p.add_argument("--key-id", action="store_true", help="send `kid` (libtrust key id) instead of `x5c`")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0: a free port")
    p.add_argument("--port-file", help="write the port here once listening")
    p.add_argument("--path", default="/token")
    p.add_argument("--service", default="registry.test")
    p.add_argument("--issuer", default="arena-test-token")
    p.add_argument("--expires-in", type=int, default=300)
    p.add_argument("--grant-push", action="store_true", help="grant push/delete to anyone (anonymous too)")
    p.add_argument("--push-credentials", default="", metavar="USER:PASS",
                   help="grant push/delete to a request with these Basic credentials")
    p.add_argument("--accept-any-credentials", action="store_true",
                   help="treat wrong Basic credentials as anonymous instead of answering 401")
    p.add_argument("--deny", action="append", default=[], help="a repository that gets no access")
    p.add_argument("--fields", choices=["both", "token", "access_token"], default="both",
                   help="which of `token` (GHCR) and `access_token` the answer carries (Docker Hub: both)")
    p.add_argument("--proxy-port-file", metavar="FILE",
                   help="pass every other request to the registry on 127.0.0.1:PORT (PORT read from FILE), "
                        "so that the registry is also reachable on the realm's origin (GHCR's layout)")
    p.add_argument("--print-key-id", action="store_true", help="print the key's libtrust id and exit")
    args = p.parse_args()
    if args.print_key_id:
        with open(args.key) as f:
            n, e, _ = read_rsa_key(f.read())
        print(libtrust_key_id(spki_der(n, e)))
        return
    if not args.key_id and not args.cert:
        p.error("--cert is needed (or --key-id)")
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        p.error("loopback only")
    server = ThreadingHTTPServer((args.host, args.port), handler_for(Tokens(args)))
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, args.port_file)
    sys.stderr.write(json.dumps({"listening": f"http://{args.host}:{port}{args.path}"}) + "\n")
    sys.stderr.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
