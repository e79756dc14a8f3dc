"""A local stand-in for the parts of the Hugging Face Hub HTTP API that `Trainer.push_to_hub` uses (the real Hub
cannot be reached from the test machines): create a repo, validate the card's YAML, pre-upload (every file as a
"regular" file, so contents come inline in the commit), commit. Files of every commit are kept in memory, with the
request log and the Authorization headers seen."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class HubStandIn:
    def __init__(self):
        self.repos: dict[str, dict[str, bytes]] = {}
        self.commits: list[dict] = []
        self.requests: list[tuple[str, str]] = []
        self.auth_headers: list[str | None] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _reply(self, status: int, obj) -> None:
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def do_GET(self):
                hub.requests.append(("GET", self.path))
                if self.path.startswith("/api/whoami-v2"):
                    return self._reply(200, {"name": "standin-user", "type": "user", "orgs": []})
                self._reply(404, {"error": f"not in the stand-in: GET {self.path}"})

            def do_POST(self):
                path = self.path.split("?")[0]
                hub.requests.append(("POST", path))
                hub.auth_headers.append(self.headers.get("Authorization"))
                body = self._body()
                if path == "/api/repos/create":
                    payload = json.loads(body)
                    repo = f"{payload.get('organization') or 'standin-user'}/{payload['name']}"
                    hub.repos.setdefault(repo, {})
                    return self._reply(200, {"url": f"http://{self.headers['Host']}/{repo}", "name": repo})
                if path == "/api/validate-yaml":
                    return self._reply(200, {"errors": [], "warnings": []})
                m = re.fullmatch(r"/api/models/([^/]+/[^/]+)/preupload/.+", path)
                if m:
                    files = json.loads(body)["files"]
                    return self._reply(200, {"files": [
                        {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": None}
                        for f in files]})
                m = re.fullmatch(r"/api/models/([^/]+/[^/]+)/commit/.+", path)
                if m:
                    repo, files = m.group(1), {}
                    for line in body.decode().splitlines():
                        item = json.loads(line)
                        if item["key"] == "file":
                            files[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
                        elif item["key"] == "lfsFile":
                            return self._reply(400, {"error": "the stand-in takes regular files only"})
                    hub.repos.setdefault(repo, {}).update(files)
                    oid = hashlib.sha1(body).hexdigest()
                    hub.commits.append({"repo": repo, "files": sorted(files)})
                    return self._reply(200, {"commitUrl": f"http://{self.headers['Host']}/{repo}/commit/{oid}",
                                             "commitOid": oid})
                self._reply(404, {"error": f"not in the stand-in: POST {path}"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
