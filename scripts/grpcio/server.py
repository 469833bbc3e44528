#!/usr/bin/env python3
"""The grpcio server scripts/grpc-storm-check.sh storms.

  server.py --port-file PATH [--workers N] [--service-ms MS]

A grpcio server (the release on PYTHONPATH) on 127.0.0.1, a port the
system picks, written to PATH once it serves. One generic handler, no
.proto: every unary method is answered after a sleep of the service time
(MS, default 100) in one of N worker threads (default 8): grpcio runs each
call's handler in the server's ThreadPoolExecutor, whose queue is
unbounded, so N workers are the server's edge (N / MS calls a second) and
the executor's queue its backlog. grpc.health.v1.Health/Check is answered
SERVING (the message b"\\x08\\x01": field 1, status, varint 1) after the
same sleep in the same pool, so that the storm's checks of the target wait
as its clients do; any other method is answered with an empty message.
No maximum_concurrent_rpcs: a call is never refused for load, it waits.

Each finished call is counted; on exit (SIGTERM or SIGINT) the counts of calls answered and of calls whose client had gone
when their handler began or ended (context.is_active() false) are written
to PATH + ".counts" as JSON, read by the check.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time
from concurrent import futures

GRPCIO_VERSION = "1.85.3"
HEALTH_CHECK = "/grpc.health.v1.Health/Check"
SERVING = b"\x08\x01"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port-file", required=True)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--service-ms", type=float, default=100.0)
    args = p.parse_args()

    import grpc

    if grpc.__version__ != GRPCIO_VERSION:
        sys.exit(f"grpcio {grpc.__version__} found, {GRPCIO_VERSION} wanted")
    service_s = args.service_ms / 1000.0
    lock = threading.Lock()
    counts = {"answered": 0, "gone_at_start": 0, "gone_at_end": 0}

    def handler(method):
        def call(request, context):
            gone_start = not context.is_active()
            time.sleep(service_s)
            gone_end = not context.is_active()
            with lock:
                counts["answered"] += 1
                counts["gone_at_start"] += gone_start
                counts["gone_at_end"] += gone_end
            return SERVING if method == HEALTH_CHECK else b""

        return call

    class Generic(grpc.GenericRpcHandler):
        def service(self, details):
            # Raw bytes in and out: no deserialisers.
            return grpc.unary_unary_rpc_method_handler(handler(details.method))

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=args.workers))
    server.add_generic_rpc_handlers((Generic(),))
    port = server.add_insecure_port("127.0.0.1:0")
    if not port:
        sys.exit("could not bind 127.0.0.1")
    server.start()

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.replace(tmp, args.port_file)
    while not done.wait(1.0):
        pass
    server.stop(grace=1.0).wait()
    with lock:
        with open(args.port_file + ".counts", "w") as f:
            json.dump(counts, f)
            f.write("\n")


if __name__ == "__main__":
    main()
