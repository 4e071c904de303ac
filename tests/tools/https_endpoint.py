#!/usr/bin/env python3
"""An HTTPS endpoint with a certificate of its own (no CA vouches for it)
that answers only requests carrying a header: what tps bench meets behind a
private CA and a gateway that wants an auth header. For the tests.

  https_endpoint.py DIR HEADER VALUE

Makes a self-signed certificate in DIR (openssl), listens on 127.0.0.1 on a
free port, prints the port and serves until killed: every request without
HEADER: VALUE gets 401; POST /tokenize answers {"tokens": [one per word, +1
for BOS]}; POST /v1/completions streams two tokens and usage; the rest 404.
Each request's path and whether it had the header go to DIR/requests.log."""
import http.server
import json
import os
import ssl
import subprocess
import sys

DIR, HEADER, VALUE = sys.argv[1], sys.argv[2], sys.argv[3]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _reply(self, code, ctype, data):
        self.send_response(code)
        for name, value in (("Content-Type", ctype), ("Content-Length", str(len(data)))):
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _allowed(self):
        ok = self.headers.get(HEADER) == VALUE
        with open(os.path.join(DIR, "requests.log"), "a") as f:
            f.write("%s %s %s\n" % (self.command, self.path, "header" if ok else "no-header"))
        if not ok:
            self._reply(401, "application/json", b'{"error":"missing header"}')
        return ok

    def do_GET(self):
        if self._allowed():
            self._reply(404, "application/json", b'{"error":"no"}')

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if not self._allowed():
            return
        if self.path == "/tokenize":
            words = json.loads(body).get("content", "").split()
            out = json.dumps({"tokens": list(range(len(words) + 1))}).encode()
            self._reply(200, "application/json", out)
        elif self.path == "/v1/completions":
            chunks = [{"choices": [{"index": 0, "text": "w "}]} for _ in range(2)]
            chunks.append({"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": 2}})
            data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
            self._reply(200, "text/event-stream", data + b"data: [DONE]\n\n")
        else:
            self._reply(404, "application/json", b'{"error":"no"}')


def main():
    cert, key = os.path.join(DIR, "cert.pem"), os.path.join(DIR, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
