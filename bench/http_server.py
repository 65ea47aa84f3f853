#!/usr/bin/env python3
"""A tiny local JSON server for bench/http.sh: prints its port, then serves
`{"ok": true, "n": 1}` to every GET until killed. Stdlib only."""
import http.server, sys


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = b'{"ok": true, "n": 1}'

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(self.body)
        self.close_connection = True

    def log_message(self, *a):
        pass


s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
