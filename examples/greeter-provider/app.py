"""A `greeter` service in plain Python (standard library only), put behind Axle by
`axle sidecar`. The sidecar forwards each Axle request as `POST /{service}/{method}`
with a JSON body and maps the status back: 2xx is the answer, 4xx a business error
(400 bad request, 404 no such method), 5xx a failure. `GET /health` tells the sidecar
the app is ready; only then does it register the service.

    python3 app.py [PORT]        # PORT 0 (the default) picks a free port

Prints `listening on 127.0.0.1:PORT` once it accepts requests.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Greeter(BaseHTTPRequestHandler):
    # Keep-alive: the sidecar reuses its connections.
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path == "/health":
            self.reply(200, {"status": "ok"})
        else:
            self.reply(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            return self.reply(400, {"error": {"message": "the body is not JSON"}})
        if self.path != "/greeter/hello":
            return self.reply(404, {"error": {"message": f"no method {self.path}"}})
        name = request.get("name") if isinstance(request, dict) else None
        if not isinstance(name, str) or not name:
            return self.reply(422, {"error": {"message": "`name` is required"}})
        self.reply(200, {"greeting": f"hello, {name}", "served_by": self.server.server_port})

    def reply(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = ThreadingHTTPServer(("127.0.0.1", port), Greeter)
    server.daemon_threads = True
    print(f"listening on 127.0.0.1:{server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
