#!/usr/bin/env python3
"""Whether a gRPC server on 127.0.0.1 answers grpc.health.v1.Health/Check
SERVING, for scripts/grpc-storm-check.sh.

  answers.py PORT [WITHIN_S]

Calls it with grpcio (on PYTHONPATH) until it answers SERVING, each call
given 10 s, for at most WITHIN_S seconds (60); prints the seconds it took
and exits 0, or exits 1.
"""

import sys
import time

SERVING = b"\x08\x01"


def main():
    import grpc

    port, within = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    start = time.monotonic()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check", _registered_method=True)
        while time.monotonic() - start < within:
            left = within - (time.monotonic() - start)
            try:
                if check(b"", timeout=min(10.0, left)) == SERVING:
                    print(f"{time.monotonic() - start:.1f}")
                    return 0
            except grpc.RpcError:
                time.sleep(0.5)
    return 1


if __name__ == "__main__":
    sys.exit(main())
