#!/usr/bin/env python3
"""Builds the seed corpus of every fuzz target from the repository's own examples and fixtures.

Usage: tests/fuzz/corpus.py OUTDIR   (writes OUTDIR/<target>/seed-*; existing files are kept, so
the inputs libFuzzer found in earlier runs stay in the corpus). Nothing generated is committed.
"""
import glob
import hashlib
import json
import os
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def read(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


def files(pattern):
    return sorted(glob.glob(os.path.join(ROOT, pattern)))


def job_lines():
    return [l for l in read("examples/jobs.jsonl").splitlines() if l.strip()]


def requests():
    out = []
    for line in job_lines():
        try:
            req = json.loads(line).get("request")
        except ValueError:
            continue
        if isinstance(req, dict):
            out.append(json.dumps(req).encode())
    return out


def patterns(node, found):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "pattern" and isinstance(v, str):
                found.append(v.encode())
            else:
                patterns(v, found)
    elif isinstance(node, list):
        for v in node:
            patterns(v, found)
    return found


def provider_files(*dirs):
    out = []
    for d in dirs:
        out += [read(os.path.relpath(p, ROOT)) for p in files("tests/fixtures/" + d + "/*.http")]
        out += [read(os.path.relpath(p, ROOT)) for p in files("tests/fixtures/" + d + "/*.sse")]
    return out


def http_requests():
    # A chat request as a response body: the adapter targets also translate it into a call.
    return [b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n" + r for r in requests()]


def dict_tokens(item):
    """JSON keys and short string values in item (quoted), and header names (with the colon)."""
    out = []
    text = item.decode("utf-8", "replace")
    for line in text.split("\r\n"):
        name = line.split(":", 1)[0]
        if ":" in line and 0 < len(name) < 64 and " " not in name:
            out.append(name + ":")
    start = text.find("{")
    try:
        doc = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        doc = None

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                out.append(json.dumps(k))
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif isinstance(node, str) and len(node) < 48:
            out.append(json.dumps(node))
    walk(doc)
    return [t for t in out if all(ord(c) < 128 for c in t)]


# fuzz_verify's input (tests/fuzz/fuzz_verify.c): a field is a length byte (255: absent) and its
# bytes; a topic a byte indexing its topics (these, in its order), 9 for a field naming one.
VERIFY_TOPICS = ["sluice.requests", "sluice.requests.batch", "sluice.jobs", "sluice.dispatch",
                 "sluice.results", "sluice.usage", "sluice.stream", "sluice.results.acme",
                 "sluice.stream.acme"]
ROLES = ["ingest", "scheduler", "dispatcher"]


def field(b):
    return bytes([len(b)]) + b if b is not None else b"\xff"


def verify_seeds(values):
    """Messages as an outsider writes them (byte 0 even), and messages signed (1), with a
    pair MAC (3) or signed in a batch (5) by the target, each role on each topic, with each kind
    of key."""
    sig = b"A" * 86 + b"=="
    out = []
    for t in range(len(VERIFY_TOPICS)):
        for r, role in enumerate(ROLES):
            hdrs = [(b"sluice-sig", sig), (b"sluice-signer", role.encode())]
            out.append(b"\x00" + bytes([t]) + field(b"job-%d" % t) + bytes([len(hdrs)]) +
                       b"".join(field(n) + field(v) for n, v in hdrs) + values[t % len(values)])
            for key in range(4):
                for kind in (b"\x01", b"\x03", b"\x05"):
                    out.append(kind + bytes([r, key, t % 2, t]) + b"\x01\x2a\x01" +
                               field(b"job-%d" % t if key % 2 == 0 else None) +
                               values[(t + r) % len(values)])
    # A topic by name, repeated and null headers, no headers.
    out.append(b"\x00\x09" + field(b"sluice.jobs") + field(None) + b"\x03" +
               field(b"sluice-signer") + field(b"scheduler") + field(b"sluice-sig") + field(sig) +
               field(b"sluice-sig") + field(None) + values[0])
    out.append(b"\x00\x03" + field(b"") + b"\x00" + values[0])
    out.append(b"\x01\x01\x00\x00\x09" + field(b"sluice.dispatch.x") + b"\x00\x00\x01" +
               field(b"k") + values[0])
    return out


def changelog_seed(jobs, trimmed):
    """Records of two partitions, in the writer's exact shapes: jobs, an end, a closed
    snapshot, a lease, a replayed copy."""
    def job_rec(seq, i, j):
        body = json.dumps(dict(json.loads(j), job_id="job-%d" % i), separators=(",", ":"))
        return '{"v":1,"t":"job","seq":%d,"id":"job-%d","sub":%d,"job":%s}' % (
            seq, i, 1760000000000 + i, body)

    def rec(**r):
        return json.dumps(dict(v=1, **r), separators=(",", ":"))

    recs = [job_rec(10 + i, i, j) for i, j in enumerate(jobs)]
    recs += [rec(t="begin", seq=20, epoch=20), recs[1], rec(t="close", seq=21, epoch=20),
             rec(t="end", seq=22, id="job-0"),
             rec(t="lease", seq=23, id="job-1", att=2, res="00019000000a0001" + "0" * 16,
                 dep="sim-a", exp=1760000060000), recs[0]]
    lines = [bytes([i % 2]) + r.encode() for i, r in enumerate(recs)]
    return bytes([trimmed]) + b"\n".join(lines)


def grants_seed():
    # Reports of two shards, then a coordinator's table (times near fuzz_grants' clock).
    t0 = 1700000000000
    def report(shard, seq, at, w):
        return json.dumps({"v": 1, "type": "report", "shard": shard, "seq": seq, "at": at,
                           "ack": -1, "b": {"deployment:a:tpm": [w, 1, 0, 0],
                                            "org:o:tpm": [w, 0.02, 0, 0.01]}}).encode()
    table = json.dumps({"v": 1, "type": "grants", "coordinator": "c", "epoch": 1, "seq": 1,
                        "at": t0 + 200, "lease_ms": 10000,
                        "shards": {"self": {"echo": 1, "b": {"deployment:a:tpm": 0.5,
                                                            "org:o:tpm": 0.25}},
                                   "other": {"echo": 1, "b": {"deployment:a:tpm": 0.5}}}})
    return b"\n".join([report("self", 1, t0, 2), report("other", 1, t0 + 100, 1),
                       table.encode()])


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    if sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return
    if sys.argv[1].startswith("-"):
        sys.exit("corpus.py: an output folder, not an option: %s\n%s" % (sys.argv[1], __doc__))
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    heads = [h.split(b"\r\n\r\n")[0] + b"\r\n" for h in
             provider_files("openai", "providers/openai", "providers/azure",
                            "providers/anthropic", "providers/gemini") if h.startswith(b"HTTP/")]
    sse = [s for s in provider_files("providers/openai", "providers/azure", "providers/anthropic",
                                     "providers/gemini") if not s.startswith(b"HTTP/")]
    schemas = [read(os.path.relpath(p, ROOT)) for p in
               files("schema/*.json") + files("tests/fixtures/jsonschema/*.json")]
    pats = []
    for s in schemas:
        patterns(json.loads(s), pats)
    pats += [b"^(?:a|b)*$", b"\\p{Lu}+\\s\\S", b"(?<year>\\d{4})-\\k<year>", b"[^]\\u{1F600}."]
    configs = [read(os.path.relpath(p, ROOT)) for p in
               files("examples/sluice.json") + files("tests/fixtures/config/*.json")]
    dispatch = json.dumps({"v": 1, "job_id": "job-1", "attempt": 1, "reservation_id": "ab12",
                           "lease_expires_ms": 1760433370000, "issued_ms": 1760433310000,
                           "deployment": "sim-a", "idempotency_key": "demo-1",
                           "request": json.loads(requests()[0])}).encode()
    seeds = {
        "headers": heads,
        "sse": [b"\x05" + s for s in sse],
        "openai": provider_files("openai", "providers/openai", "providers/azure") + http_requests(),
        "anthropic": provider_files("providers/anthropic") + http_requests(),
        "gemini": provider_files("providers/gemini") + http_requests(),
        "schema": [b"\x00" + s for s in schemas] + [b"\x01" + l for l in job_lines()] +
                  [b"\x02" + p for p in pats],
        "ingest": job_lines(),
        "config": configs,
        "dispatch": [b"\x00" + dispatch] + [b"\x01" + r for r in requests()],
        "verify": verify_seeds([dispatch] + job_lines()[:3]),
        "changelog": [changelog_seed(job_lines()[:4], trimmed) for trimmed in (0, 1)],
        "grants": [grants_seed()],
        "batchwire": [read(os.path.relpath(p, ROOT)) for p in files("tests/fixtures/batch/*/*")] +
                     requests(),
    }
    # verify's seeds are binary: its dictionary is from the values in them, and the names.
    dict_sources = {"verify": [dispatch] + job_lines()}
    extra_tokens = {"verify": ["sluice-sig", "sluice-mac", "sluice-batch", "sluice-signer"] + ROLES + VERIFY_TOPICS}
    # A dictionary per target: the JSON keys and strings of its seeds (config keys, schema
    # keywords, provider fields) and header names, so mutations reach past the first lookup.
    for target, items in seeds.items():
        tokens = set()
        for item in dict_sources.get(target, items):
            for tok in dict_tokens(item):
                tokens.add(tok)
        tokens.update(extra_tokens.get(target, []))
        with open(os.path.join(out, target + ".dict"), "w") as f:
            for tok in sorted(tokens):
                f.write('"%s"\n' % "".join(
                    c if 32 <= ord(c) < 127 and c not in '"\\' else "\\x%02x" % ord(c)
                    for c in tok))
    for target, items in seeds.items():
        d = os.path.join(out, target)
        os.makedirs(d, exist_ok=True)
        for item in items:
            name = "seed-" + hashlib.sha1(item).hexdigest()[:16]
            with open(os.path.join(d, name), "wb") as f:
                f.write(item)
        print("%s: %d seeds" % (target, len(items)))


if __name__ == "__main__":
    main()
