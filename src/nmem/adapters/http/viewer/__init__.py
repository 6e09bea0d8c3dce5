"""The web viewer: static HTML, vanilla JS and CSS shipped in this package (docs/viewer.md).

The files are read once, by their fixed names, when this module loads: a request's path only
picks one of them from a dict and is never opened as a file. The page calls the REST API and
the streams only; a strict Content-Security-Policy keeps scripts and styles to these files.
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
FILES = ("index.html", "app.js", "api.js", "views.js", "charts.js", "dom.js", "system.js", "style.css", "icon.svg")
ASSETS: dict[str, bytes] = {name: resources.files(__name__).joinpath(name).read_bytes() for name in FILES}
POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
          "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


def _file(name: str) -> Response:
    media = TYPES[name[name.rfind("."):]]
    return Response(ASSETS[name], media_type=media,
                    headers={"content-security-policy": POLICY, "cache-control": "no-cache",
                             "referrer-policy": "no-referrer"})


async def index(_: Request) -> Response:
    return _file("index.html")


async def asset(request: Request) -> Response:
    name = str(request.path_params["name"])
    if name not in ASSETS or name == "index.html":
        return PlainTextResponse("not found", status_code=404)
    return _file(name)


def routes() -> list[BaseRoute]:
    return [Route("/", index, methods=["GET"]), Route("/viewer/{name}", asset, methods=["GET"])]
