"""decode-events: a KV-event (or load) stream decoded by SGLang's own classes.

  decode-events --endpoint tcp://HOST:PORT [--topic kv] [--replay tcp://HOST:PORT]
                [--from SEQ] [--count N] [--timeout SECONDS]
  decode-events --endpoint tcp://HOST:PORT --kind load [--count N] [--timeout SECONDS]
  decode-events --endpoint tcp://HOST:PORT --replay tcp://HOST:PORT --from SEQ --drain
  decode-events --stdin [--kind kv|load]    (one {"frames": [hex, hex, hex]} per line)

Subscribes with pyzmq as a KV-aware router does and decodes every payload
with msgspec.msgpack.Decoder(KVEventBatch) (or LoadStat) from the pinned
wheel. Prints one JSON line per message, in sequence order:

  {"seq", "via": "live"|"replay"|"stdin", "reencoded_equal", "ts", "dp_rank", "events": [...]}
  {"seq", "via", "reencoded_equal", "load": {...}}                 (--kind load)

`reencoded_equal` says whether SGLang's encoder gives back the very bytes
received. Events are msgspec.to_builtins of SGLang's structs (tagged by
"type", unset optional fields omitted), integers exact.

With --replay and --from, the stream is made gap-free from SEQ on: the
replay endpoint (a ROUTER) is asked for [SEQ..] at once, again whenever a
live message skips ahead, and whenever the stream is quiet, so a message
missed while subscribing is still delivered. Before the first message,
{"ready": true} is printed once the subscription and the first replay are
done. Exits 0 after --count messages, 1 on --timeout. With --drain it asks
the replay endpoint once for everything kept from SEQ on, prints it and exits.
"""

import argparse
import json
import sys
import time

END_SEQ = (-1).to_bytes(8, "big", signed=True)
QUIET_SECONDS = 0.3
REPLAY_TIMEOUT_MS = 5000


def _decoders(kind):
    import msgspec

    if kind == "load":
        from sglang.srt.managers.scheduler_components.load_publisher import LoadStat

        return msgspec.msgpack.Decoder(LoadStat), msgspec.msgpack.Encoder()
    from sglang.srt.disaggregation.kv_events import KVEventBatch

    return msgspec.msgpack.Decoder(KVEventBatch), msgspec.msgpack.Encoder()


class Printer:
    def __init__(self, kind):
        import msgspec

        self.kind = kind
        self.decoder, self.encoder = _decoders(kind)
        self.to_builtins = msgspec.to_builtins

    def emit(self, seq, payload, via):
        value = self.decoder.decode(payload)
        line = {
            "seq": seq,
            "via": via,
            "reencoded_equal": self.encoder.encode(value) == payload,
        }
        if self.kind == "load":
            fields = self.to_builtins(value)
            line["load"] = dict(zip(type(value).__struct_fields__, fields[1:]))
        else:
            line["ts"] = value.ts
            line["dp_rank"] = value.attn_dp_rank
            line["events"] = [self.to_builtins(e) for e in value.events]
        print(json.dumps(line), flush=True)


def _seq_of(frame):
    return int.from_bytes(frame, "big", signed=True)


def run_stdin(printer):
    for raw in sys.stdin:
        if not raw.strip():
            continue
        frames = [bytes.fromhex(h) for h in json.loads(raw)["frames"]]
        printer.emit(_seq_of(frames[1]), frames[2], "stdin")
    return 0


class Stream:
    """A SUB socket made gap-free by the replay ROUTER."""

    def __init__(self, args, printer):
        import zmq

        self.zmq = zmq
        self.ctx = zmq.Context.instance()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.LINGER, 0)
        self.sub.setsockopt(zmq.SUBSCRIBE, args.topic.encode())
        self.sub.connect(args.endpoint)
        self.replay = None
        if args.replay:
            self.replay = self.ctx.socket(zmq.DEALER)
            self.replay.setsockopt(zmq.LINGER, 0)
            self.replay.connect(args.replay)
        self.printer = printer
        self.next = args.start
        self.count = 0

    def emit(self, seq, payload, via):
        if self.next is not None and seq < self.next:
            return  # already delivered (a replay overlapping the live stream)
        self.printer.emit(seq, payload, via)
        self.next = seq + 1
        self.count += 1

    def ask_replay(self, limit):
        if self.replay is None or self.next is None:
            return
        self.replay.send_multipart([b"", self.next.to_bytes(8, "big")])
        while self.count < limit:
            if not self.replay.poll(REPLAY_TIMEOUT_MS):
                raise TimeoutError("the replay endpoint did not answer")
            frames = self.replay.recv_multipart()
            # ROUTER -> DEALER: ["", topic, seq, payload]; ["", "", -1, ""] ends it.
            if len(frames) != 4:
                raise ValueError(f"replay answered {len(frames)} frames: {frames!r}")
            if frames[2] == END_SEQ:
                return
            self.emit(_seq_of(frames[2]), frames[3], "replay")
        # Enough messages: drain the rest of this answer so nothing is left queued.
        while self.replay.poll(REPLAY_TIMEOUT_MS):
            if self.replay.recv_multipart()[2] == END_SEQ:
                return

    def drain(self):
        self.ask_replay(sys.maxsize)
        return 0

    def close(self):
        # What a process's exit does; a kit session (session.py) lives on after the command.
        self.sub.close()
        if self.replay is not None:
            self.replay.close()

    def run(self, count, timeout):
        deadline = time.monotonic() + timeout
        self.ask_replay(count)
        print(json.dumps({"ready": True, "next": self.next}), flush=True)
        while self.count < count:
            left = deadline - time.monotonic()
            if left <= 0:
                print(f"timed out after {self.count} of {count} messages", file=sys.stderr)
                return 1
            if self.sub.poll(int(min(left, QUIET_SECONDS) * 1000)):
                _topic, seq_bytes, payload = self.sub.recv_multipart()
                seq = _seq_of(seq_bytes)
                if self.next is not None and seq > self.next:
                    self.ask_replay(count)  # a gap: fetch what was missed first
                if self.count < count:
                    self.emit(seq, payload, "live")
            else:
                self.ask_replay(count)  # quiet: anything published while subscribing?
        return 0


def main(argv):
    p = argparse.ArgumentParser(prog="decode-events")
    p.add_argument("--endpoint")
    p.add_argument("--stdin", action="store_true")
    p.add_argument("--kind", choices=["kv", "load"], default="kv")
    p.add_argument("--topic")
    p.add_argument("--replay")
    p.add_argument("--from", dest="start", type=int)
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--drain", action="store_true")
    args = p.parse_args(argv)
    if args.topic is None:
        args.topic = "load" if args.kind == "load" else ""
    printer = Printer(args.kind)
    if args.stdin:
        return run_stdin(printer)
    if not args.endpoint:
        p.error("--endpoint or --stdin is required")
    if args.replay and args.start is None:
        p.error("--replay needs --from: the first sequence number expected")
    if args.drain and not args.replay:
        p.error("--drain needs --replay and --from")
    stream = Stream(args, printer)
    try:
        return stream.drain() if args.drain else stream.run(args.count, args.timeout)
    finally:
        stream.close()
