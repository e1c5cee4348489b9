#!/usr/bin/env python3
"""A webhook receiver for trying Breakwater by hand: prints one line per request it gets.

    scripts/receiver.py [--port 9000] [--status 200] [--secret whsec_…]

Listens on 127.0.0.1 only. Answers every POST with --status (200 by default; 503 makes it a
failing endpoint, to watch a channel's circuit open). With --secret (the channel's
`signing_secret`) it also checks the Standard Webhooks signature: HMAC-SHA256 over
"{webhook-id}.{webhook-timestamp}.{body}" with the secret's base64 key, compared with each
`v1,<base64>` of `webhook-signature`. Standard library only; stop it with Ctrl-C.
A channel may point at it only when the server allows internal targets
(BREAKWATER_ALLOW_PRIVATE_TARGETS=true, for development and tests).
"""
import argparse
import base64
import hashlib
import hmac
import http.server
import time


def signature_ok(secret, headers, body):
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers.get('webhook-id')}.{headers.get('webhook-timestamp')}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    given = [s.split(",", 1)[1] for s in headers.get("webhook-signature", "").split() if "," in s]
    return any(hmac.compare_digest(expected, g) for g in given)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=9000)
    ap.add_argument("--status", type=int, default=200, help="the status every request gets")
    ap.add_argument("--secret", help="the channel's signing secret (whsec_…), to check signatures")
    a = ap.parse_args()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            sig = ""
            if a.secret:
                sig = " signature ok" if signature_ok(a.secret, self.headers, body) else " signature BAD"
            print(f"{time.strftime('%H:%M:%S')} {self.path} webhook-id={self.headers.get('webhook-id')}"
                  f" → {a.status}{sig}  {body[:200].decode(errors='replace')}", flush=True)
            self.send_response(a.status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    print(f"listening on http://127.0.0.1:{a.port}/ (every POST gets {a.status})", flush=True)
    try:
        http.server.ThreadingHTTPServer(("127.0.0.1", a.port), Handler).serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
