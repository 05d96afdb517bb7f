"""The stand-in's job DNS: on HF, a job's exposed port is `https://{job}--{port}.hf.jobs` and DNS
resolves it; the stand-in names it `http://{job}--{port}.localhost:{port}`, and names under
`localhost` are the loopback address (RFC 6761 §6.3) though glibc resolves `localhost` itself only.
Every Python process of a stand-in job (the pipeline's commands included) loads this first."""

import socket

_system_getaddrinfo = socket.getaddrinfo


def _loopback_names(host, *args, **kwargs):
    if isinstance(host, str) and host.rstrip(".").lower().endswith(".localhost"):
        host = "127.0.0.1"
    return _system_getaddrinfo(host, *args, **kwargs)


socket.getaddrinfo = _loopback_names
