"""`shepherd console`: a web console for a Shepherd API (the local stack's or a deployed one).

A small stdlib server on 127.0.0.1 serves hand-written static files (shipped with the
package: no CDN, no build step) and proxies `/api/...` to the API, signing for a deployed one.
"""

from shepherd_cli.console.server import TOKEN_HEADER, Console

__all__ = ["TOKEN_HEADER", "Console"]
