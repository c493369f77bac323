#!/usr/bin/env python3
"""normsim's counter example job in Python: the same job as
examples/jobs/counter (Go), speaking the job socket by hand with the
`websockets` package (Debian: python3-websockets; pip: websockets).

It sends a sequence number to its output at a steady rate and hands over at
an exact position:

* output: one UDP datagram {"job","instance","seq"} per packet to
  NORMSIM_OUTPUT_ADDR (none when unset), COUNTER_RATE packets per second
  (default 50). A fresh counter starts at the number of ticks since the Unix
  epoch, so two counters started independently agree on "now" and a gap or
  overlap between them shows up as lost or repeated numbers.
* job socket: NORSK_WORKER_WS_URL and NORSK_WORKER_TOKEN (both unset: no
  socket, the counter just produces). It says hello, waits for hello-ack, and
  then answers the worker:
    get-state      -> state {"rate": n}
    initial-state  -> target-ready {"ready": true}          (target)
    cutover-ready  -> stops output, source-stopped-output {"last": n}
    cutover-apply  -> continues from last+1, target-applied (target)
    abort          -> a source that had stopped resumes; a target stays idle
  A connection lost before the source said source-stopped-output rolls back
  like an abort; one lost after it does not (the point of no return).

Runs until SIGTERM or SIGINT. Needs Python 3.8+ and websockets 10 or later.
"""

import asyncio
import json
import logging
import os
import random
import signal
import socket
import sys
import time
import urllib.parse

import websockets

log = logging.getLogger("python-counter")

# Close codes of the contract (docs/contract.md section 1).
CLOSE_PROTOCOL_ERROR = 4400
CLOSE_UNAUTHORIZED = 4401
CLOSE_REPLACED = 4409
HELLO_TIMEOUT_REASON = "no hello within"  # a 4401 that only means "late"
MAX_FRAME = 64 * 1024

WORKER_FRAMES = {"hello-ack", "get-state", "initial-state", "cutover-ready", "cutover-apply", "abort"}


class Counter:
    """The output: producing or not, the next number, the last one sent."""

    def __init__(self, rate, job, inst, out):
        self.rate, self.job, self.inst, self.out = rate, job, inst, out
        self.producing = False
        self.next = 0
        self.sent = -1

    def clock_tick(self):
        return int(time.time() * 1000) * self.rate // 1000

    def start_at(self, n):
        self.next, self.producing = n, True
        log.info("output started from=%d", n)

    def stop(self):
        """Stops the output and returns the last number sent. The output loop
        runs on the same event loop, so no packet can slip out after this."""
        self.producing = False
        return self.sent

    async def loop(self):
        period = 1.0 / self.rate
        loop = asyncio.get_running_loop()
        due = loop.time()
        report = due + 1
        while True:
            due += period
            await asyncio.sleep(max(0.0, due - loop.time()))
            if self.producing:
                seq = self.next
                self.next += 1
                self.sent = seq
                self.emit(seq)
            if loop.time() >= report:
                report += 1
                log.info("counter producing=%s last=%d", self.producing, self.sent)

    def emit(self, seq):
        if self.out is None:
            return
        b = json.dumps({"job": self.job, "instance": self.inst, "seq": seq}).encode()
        try:
            self.out.send(b)
        except OSError as e:  # the sink is not there (yet): like UDP, drop it
            log.warning("output: %s", e)


class Stopped(Exception):
    """The worker told us to go away for good (4409 replaced, 4401 refused)."""


class Socket:
    """The job's side of the job socket, reconnecting until stopped."""

    def __init__(self, counter, url, token, stop):
        self.c, self.url, self.token = counter, url, token
        # Set on SIGTERM: no reconnect after it, even where a cancellation
        # is lost (asyncio.wait_for may swallow one before Python 3.12).
        self.stop = stop
        self.acked = asyncio.Event()
        self.target_of = None  # migration id when launched as a migration target
        # The source's migration in progress: its id, and whether this side
        # has passed the point of no return (sent source-stopped-output).
        self.migration = None
        self.committed = False
        # The migration whose get-state this connection answered: a
        # get-state delivered twice is one question, and a second state
        # would be out of phase (the worker closes the socket with 4400).
        self.asked = None

    async def run(self):
        backoff = 0.25
        while not self.stop.is_set():
            try:
                await self.session()
                backoff = 0.25
            except Stopped as e:
                log.error("job socket: %s; not reconnecting", e)
                return
            except (OSError, websockets.exceptions.WebSocketException, asyncio.TimeoutError) as e:
                log.warning("job socket: %s", describe(e))
            self.lost()
            delay = backoff * (0.5 + random.random())  # jittered, so jobs dropped together do not return together
            backoff = min(backoff * 2, 10.0)
            await asyncio.sleep(delay)

    async def session(self):
        async with websockets.connect(self.url, max_size=1 << 20, open_timeout=10) as ws:
            self.asked = None  # a new connection may be asked anew
            try:
                # The worker may close before the hello is written (a path
                # that names no instance is refused at once): that close
                # says as much as one read after it.
                await ws.send(json.dumps({"type": "hello", "token": self.token}))
                first = await asyncio.wait_for(ws.recv(), 10)
            except websockets.exceptions.ConnectionClosed as e:
                raise self.closed(e)
            f = self.parse(first)
            if f is None or f["type"] != "hello-ack":
                await ws.close(CLOSE_PROTOCOL_ERROR, "expected hello-ack first")
                return
            m = f.get("migration")
            if isinstance(m, dict) and m.get("side") == "target":
                self.target_of = m.get("id")
                log.info("job socket connected as a migration target migration=%s", self.target_of)
            else:
                log.info("job socket connected")
            self.acked.set()
            try:
                async for data in ws:
                    if self.stop.is_set():
                        # Stopping: answer nothing more. A target told
                        # cutover-apply on its way out would report a
                        # handover it will never produce for.
                        return
                    f = self.parse(data)
                    if f is None or f["type"] == "hello-ack":
                        await ws.close(CLOSE_PROTOCOL_ERROR, "unexpected frame")
                        return
                    reply = self.handle(f)
                    if reply is not None:
                        b = json.dumps(reply)
                        if len(b.encode()) > MAX_FRAME:
                            raise RuntimeError(reply["type"] + " frame over the 64 KiB cap")
                        if reply["type"] == "source-stopped-output":
                            # Commit before the bytes go out: the worker may
                            # act on them before send returns.
                            self.committed = True
                        await ws.send(b)
            except websockets.exceptions.ConnectionClosed as e:
                raise self.closed(e)

    def closed(self, e):
        code, reason = close_of(e)
        if code == CLOSE_REPLACED:
            return Stopped("replaced by a newer connection for this instance (4409)")
        if code == CLOSE_UNAUTHORIZED and not reason.startswith(HELLO_TIMEOUT_REASON):
            return Stopped("the worker refused the token or the instance (4401): " + reason)
        return e

    @staticmethod
    def parse(data):
        if not isinstance(data, str):
            log.warning("job socket: binary frame; the protocol has text frames only")
            return None
        try:
            f = json.loads(data)
        except ValueError as e:
            log.warning("job socket: frame is not JSON: %s", e)
            return None
        if not isinstance(f, dict) or f.get("type") not in WORKER_FRAMES:
            log.warning("job socket: not a worker frame: %.200s", data)
            return None
        return f

    def handle(self, f):
        t, mid = f["type"], f.get("migrationId")
        if t == "get-state":
            if mid is not None and mid == self.asked:
                log.warning("get-state repeated for a migration already asked; ignored migration=%s", mid)
                return None
            self.asked = mid
            log.info("get-state migration=%s", mid)
            self.migration, self.committed = mid, False
            return {"type": "state", "payload": {"rate": self.c.rate}}
        if t == "initial-state":
            log.info("initial-state migration=%s state=%s", mid, json.dumps(f.get("payload")))
            return {"type": "target-ready", "payload": {"ready": True}}
        if t == "cutover-ready":
            self.migration = mid
            last = self.c.stop()
            log.info("cutover-ready: output stopped migration=%s last=%d", mid, last)
            return {"type": "source-stopped-output", "payload": {"last": last}}
        if t == "cutover-apply":
            pos = f.get("payload")
            if not isinstance(pos, dict) or not isinstance(pos.get("last"), int):
                reason = 'cutover-apply position is not {"last": n}: ' + json.dumps(pos)
                log.error("%s", reason)
                return {"type": "target-applied", "failed": [{"id": "cutover-apply", "reason": reason}]}
            self.c.start_at(pos["last"] + 1)
            self.target_of = None  # the producer now; a later migration moves it as a source
            log.info("cutover-apply: output continues migration=%s from=%d", mid, pos["last"] + 1)
            return {"type": "target-applied", "applied": ["counter"]}
        if t == "abort":
            self.abort(mid, f.get("reason", ""))
        return None

    def abort(self, mid, reason):
        if self.target_of is not None and mid == self.target_of:
            # A target rolled back produces nothing; the worker removes it.
            log.warning("migration aborted (target) migration=%s reason=%s", mid, reason)
            return
        # The worker decides where the point of no return fell: an abort
        # that crossed our source-stopped-output on the wire means it
        # rolled back, so the source resumes even after it said it stopped.
        self.resume(mid, reason)

    def lost(self):
        """A connection lost before the point of no return rolls back, as the
        worker does on its side."""
        if self.migration is not None and not self.committed:
            self.resume(self.migration, "connection to the worker was lost")

    def resume(self, mid, reason):
        resumed = False
        if not self.c.producing and self.c.sent >= 0 and self.target_of is None:
            self.c.next, self.c.producing = self.c.sent + 1, True
            resumed = True
        self.migration = None
        log.warning("migration aborted migration=%s reason=%s resumed=%s", mid, reason, resumed)


def close_of(e):
    """The close code and reason of a ConnectionClosed, on websockets 10 to 14."""
    rcvd = getattr(e, "rcvd", None)
    if rcvd is not None:
        return rcvd.code, rcvd.reason
    return getattr(e, "code", 0), getattr(e, "reason", "")


def describe(e):
    if isinstance(e, websockets.exceptions.ConnectionClosed):
        code, reason = close_of(e)
        return "connection closed (%s %s)" % (code, reason)
    return str(e) or type(e).__name__


def identity():
    """The job and instance names for attribution: normsim passes them, and
    the socket URL (/instances/<jobId>/<role>) carries them too."""
    job, inst = os.environ.get("NORMSIM_JOB", ""), os.environ.get("NORMSIM_INSTANCE", "")
    path = urllib.parse.urlsplit(os.environ.get("NORSK_WORKER_WS_URL", "")).path
    parts = path.rstrip("/").split("/")
    if len(parts) == 4 and parts[1] == "instances" and parts[2] and parts[3]:
        job = job or urllib.parse.unquote(parts[2])
        inst = inst or urllib.parse.unquote(parts[3])
    return job, inst or socket.gethostname()


def rate_from_env():
    v = os.environ.get("COUNTER_RATE", "")
    if v == "":
        return 50
    try:
        n = int(v)
    except ValueError:
        n = 0
    if not 1 <= n <= 100000:
        raise SystemExit("COUNTER_RATE must be a whole number from 1 to 100000; got %r" % v)
    return n


async def main():
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    rate = rate_from_env()
    job, inst = identity()
    out = None
    addr = os.environ.get("NORMSIM_OUTPUT_ADDR", "")
    if addr:
        host, _, port = addr.rpartition(":")
        out = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
        out.connect((host.strip("[]"), int(port)))
    c = Counter(rate, job, inst, out)
    log.info("counter starting job=%s instance=%s rate=%d output=%s", job, inst, rate, addr)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    tasks = [asyncio.ensure_future(c.loop())]
    url, token = os.environ.get("NORSK_WORKER_WS_URL", ""), os.environ.get("NORSK_WORKER_TOKEN", "")
    if url and token:
        s = Socket(c, url, token, stop)
        tasks.append(asyncio.ensure_future(s.run()))
        # A migration target learns it is one from its hello-ack: wait for it
        # before producing, so a target never writes before its cutover. A
        # SIGTERM meanwhile (a target removed before its hello was answered)
        # ends the wait: the job stops at once, producing nothing.
        acked, stopping = asyncio.ensure_future(s.acked.wait()), asyncio.ensure_future(stop.wait())
        await asyncio.wait({acked, stopping}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        acked.cancel()
        stopping.cancel()
        if stop.is_set():
            pass
        elif not s.acked.is_set():
            log.warning("job socket not reachable; producing anyway")
            c.start_at(c.clock_tick())
        elif s.target_of is not None:
            log.info("started as a migration target; waiting for cutover-apply migration=%s", s.target_of)
        else:
            c.start_at(c.clock_tick())
    else:
        if url or token:
            log.warning("job socket disabled: both NORSK_WORKER_WS_URL and NORSK_WORKER_TOKEN are needed")
        c.start_at(c.clock_tick())

    await stop.wait()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    log.info("counter stopping last=%d", c.sent)


if __name__ == "__main__":
    asyncio.run(main())
