"""A host-only service for the own-address tests: listens on 0.0.0.0:PORT
(every address of the network namespace the test made), writes READY to
FILE once listening, appends CONNECTION to it for each connection, and
answers each with the JSON object {"canary": CANARY}.

Usage: host_service.py FILE PORT CANARY
"""

import json
import socket
import sys

path, port, canary = sys.argv[1], int(sys.argv[2]), sys.argv[3]
body = json.dumps({"canary": canary}).encode()
head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
reply = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", port))
s.listen(8)
with open(path, "w") as f:
    f.write("READY\n")
while True:
    c, _ = s.accept()
    c.recv(4096)
    with open(path, "a") as f:
        f.write("CONNECTION\n")
    c.sendall(reply)
    c.close()
