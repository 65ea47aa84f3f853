#!/usr/bin/env python3
"""The bare comparator of bench/served.sh: an HTTP server with glovebox's
invoke endpoint (`POST /api/v1/tools/{name}/invoke`, `GET /api/v1/tools`)
that runs the program by a plain fork+exec per call (no jail, no audit, no
schema) and answers a small Outcome-shaped JSON. Prints its port, serves
until killed. Stdlib only: a thread per connection, like the load client.

Usage: bare_server.py PROGRAM [ARG...]
"""
import http.server
import json
import subprocess
import sys

ARGV = sys.argv[1:] or ["true"]


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.reply({"tools": [{"name": "noop"}]})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        p = subprocess.run(ARGV, stdin=subprocess.DEVNULL, capture_output=True)
        self.reply({"ok": p.returncode == 0, "exit_code": p.returncode,
                    "stdout": p.stdout.decode(errors="replace")})

    def log_message(self, *a):
        pass


class S(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


s = S(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
