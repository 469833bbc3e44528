"""The aiohttp server of scripts/gunicorn-check.sh --server aiohttp and of scripts/twin-atlas.sh.

  python3 app.py --port PORT [--host 127.0.0.1] [--backlog 1000]
                 [--slots 20] [--work await|cpu] [--handler-cancellation on|off]
                 [--pid FILE]

aiohttp's own web server (an Application behind an AppRunner and a
TCPSite, as aiohttp documents for a server of one's own) with
handler_cancellation=True by default (--handler-cancellation): when a client's connection is lost, aiohttp
cancels the task that handles its request (web_protocol.py,
RequestHandler.connection_lost; see scripts/gunicorn-check.sh's header
for what ends a connection). One process, one event loop.

Each request waits for one of --slots slots (an asyncio.Semaphore, first
come first served), holds it for the service time
(GUNICORN_CHECK_SERVICE_MS, default 100 ms) and is answered 200 "OK": a
pool of 20 workers as gunicorn's, whose queue is the semaphore's waiters
(unbounded, in memory: aiohttp accepts every connection it can) and, when
the process is stopped, the listening socket's backlog (--backlog; the
script gives 50 a slot, gunicorn's 1,000 for its 20 workers).
Work for a client that has gone costs a slot for as long as it is done,
as a gunicorn worker's does; a cancelled handler frees its slot at once.

--slots 0 takes no slot: every request is served at once, its service
time awaited beside every other's (an event loop whose handlers await,
unbounded). --work cpu spends the service time on the processor instead
of awaiting it (a loop of arithmetic that never yields): the event loop
serves one request at a time, first come first served, whatever the
slots. --handler-cancellation off is aiohttp's own default (handlers run
to their end whatever the client does), as scripts/twin-atlas.sh runs it.

One line per request is appended to requests.PID.tsv in the folder
GUNICORN_CHECK_LOG_DIR (buffered, flushed every second and at the stop),
tab-separated: the unix times (seconds) at which the handler began and
ended, whether the client had gone at each (0 or 1), how it ended (0
answered, 1 cancelled while waiting for a slot, 2 cancelled in service)
and the seconds it held a slot. Gone: the connection's TCP state, read
with TCP_INFO, is no longer ESTABLISHED (the client's FIN or reset has
reached the socket, whether or not aiohttp has read it yet); a cancelled
handler's client has gone at its end by definition. Through a fault
proxy the client is the proxy's connection to the server.

SIGTERM or SIGINT: the site is closed, handlers still running are given
5 s, the log flushed, exit 0. The pid file is written once it listens.
"""

import argparse
import asyncio
import os
import signal
import socket
import sys
import time

from aiohttp import web

SERVICE_S = float(os.environ.get("GUNICORN_CHECK_SERVICE_MS", "100")) / 1000.0
LOG_DIR = os.environ.get("GUNICORN_CHECK_LOG_DIR", "")
TCP_ESTABLISHED = 1

ANSWERED, CANCELLED_WAITING, CANCELLED_IN_SERVICE = 0, 1, 2


def gone(sock):
    """Whether the client has closed or reset its side of the connection."""
    if sock is None:
        return True
    try:
        # tcpi_state, the first byte of struct tcp_info.
        return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] != TCP_ESTABLISHED
    except OSError:
        return True


class Log:
    def __init__(self, folder):
        self.file = None
        if folder:
            path = os.path.join(folder, "requests.%d.tsv" % os.getpid())
            self.file = open(path, "a", buffering=1 << 16)

    def write(self, start, end, gone_at_start, gone_at_end, outcome, slot_s):
        if self.file is not None:
            self.file.write("%.6f\t%.6f\t%d\t%d\t%d\t%.6f\n" % (
                start, end, gone_at_start, gone_at_end, outcome, slot_s))

    def flush(self):
        if self.file is not None:
            self.file.flush()

    async def flusher(self):
        while True:
            await asyncio.sleep(1.0)
            self.flush()


class NoSlot:
    """A semaphore that never makes anyone wait (--slots 0)."""

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False


def busy(seconds):
    """Spends `seconds` of the processor without yielding to the loop."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def application(slots, log, work):
    semaphore = asyncio.Semaphore(slots) if slots > 0 else NoSlot()

    async def serve_one():
        if work == "cpu":
            busy(SERVICE_S)
        else:
            await asyncio.sleep(SERVICE_S)

    async def handle(request):
        transport = request.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        start = time.time()
        gone_at_start = gone(sock)
        outcome = CANCELLED_WAITING
        held = None
        try:
            async with semaphore:
                held = time.time()
                outcome = CANCELLED_IN_SERVICE
                await serve_one()
                outcome = ANSWERED
                end = time.time()
        except asyncio.CancelledError:
            end = time.time()
            log.write(start, end, gone_at_start, 1, outcome, end - held if held else 0.0)
            raise
        log.write(start, end, gone_at_start, gone(sock), outcome, end - held)
        return web.Response(text="OK")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


async def serve(args):
    log = Log(LOG_DIR)
    runner = web.AppRunner(
        application(args.slots, log, args.work),
        handler_cancellation=args.handler_cancellation == "on",
        access_log=None,
        shutdown_timeout=5.0,
    )
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port, backlog=args.backlog)
    await site.start()
    if args.pid:
        with open(args.pid + ".tmp", "w") as f:
            f.write("%d\n" % os.getpid())
        os.rename(args.pid + ".tmp", args.pid)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    flusher = asyncio.create_task(log.flusher())
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        flusher.cancel()
        log.flush()


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--backlog", type=int, default=1000)
    parser.add_argument("--slots", type=int, default=20)
    parser.add_argument("--work", choices=("await", "cpu"), default="await")
    parser.add_argument("--handler-cancellation", choices=("on", "off"), default="on")
    parser.add_argument("--pid", default="")
    args = parser.parse_args(argv[1:])
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
