"""The WSGI application scripts/gunicorn-check.sh serves with gunicorn.

Each request sleeps a service time (GUNICORN_CHECK_SERVICE_MS, default
100 ms) and is answered 200 "OK". Around the sleep the handler looks at
the client's side of the connection: gunicorn's sync worker gives the
socket as environ["gunicorn.socket"], and a recv(1, MSG_PEEK |
MSG_DONTWAIT) that returns b"" means the client has closed its side (the
storm's client sends one GET and closes only when it gives up, so this
is a client that has gone), BlockingIOError that it is still there, a
reset that it has gone too. Over TLS (gunicorn's --certfile) the socket
is an ssl.SSLSocket, whose recv takes no flags (ValueError), and a peek
at its TCP bytes would find a TLS record (a close_notify) before the end
of the stream: there the kernel is asked instead, by a poll for
POLLRDHUP (the peer shut its side down) or POLLHUP and POLLERR (reset).

Each worker appends one line per request to its own file,
requests.PID.tsv, in the folder GUNICORN_CHECK_LOG_DIR: the unix times
(seconds) at which the handler started and finished, and whether the
client had gone at each (0 or 1), tab-separated. The file is buffered,
flushed at least every second by a thread of the worker's and at its
exit.
"""

import atexit
import os
import select
import socket
import ssl
import threading
import time

SERVICE_S = float(os.environ.get("GUNICORN_CHECK_SERVICE_MS", "100")) / 1000.0
LOG_DIR = os.environ.get("GUNICORN_CHECK_LOG_DIR", "")
BODY = b"OK"

_lock = threading.Lock()
_log = {"pid": None, "file": None}


def _flush():
    with _lock:
        if _log["file"] is not None:
            _log["file"].flush()


def _flusher():
    while True:
        time.sleep(1.0)
        _flush()


def _file():
    """This worker's file, opened on its first request (after the fork)."""
    pid = os.getpid()
    if _log["pid"] != pid:
        path = os.path.join(LOG_DIR, "requests.%d.tsv" % pid)
        _log["file"] = open(path, "a", buffering=1 << 16)
        _log["pid"] = pid
        atexit.register(_flush)
        threading.Thread(target=_flusher, name="flush", daemon=True).start()
    return _log["file"]


def _gone(sock):
    """Whether the client has closed its side of the connection."""
    if isinstance(sock, ssl.SSLSocket):
        return _gone_tls(sock)
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        # Reset: gone as well.
        return True


def _gone_tls(sock):
    """Whether the client of a TLS connection has closed or reset it."""
    poll = select.poll()
    poll.register(sock.fileno(), select.POLLRDHUP)
    events = poll.poll(0)
    ended = select.POLLRDHUP | select.POLLHUP | select.POLLERR
    return bool(events and events[0][1] & ended)


def app(environ, start_response):
    sock = environ.get("gunicorn.socket")
    start = time.time()
    gone_at_start = sock is not None and _gone(sock)
    time.sleep(SERVICE_S)
    gone_at_end = sock is not None and _gone(sock)
    end = time.time()
    if LOG_DIR:
        with _lock:
            _file().write(
                "%.6f\t%.6f\t%d\t%d\n" % (start, end, gone_at_start, gone_at_end)
            )
    start_response(
        "200 OK",
        [("Content-Type", "text/plain"), ("Content-Length", str(len(BODY)))],
    )
    return [BODY]
