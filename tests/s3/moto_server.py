"""Runs the loopback S3 server for the tests in a process of its own: ``python moto_server.py``.

moto's server is a Flask app.  Importing Flask into the test process would leave werkzeug proxies in
``sys.modules`` that raise on ``hasattr``, which breaks vLLM's kernel registration in any in-process
engine built later in the session; a separate process keeps the tests' interpreter clean.  Prints
``PORT`` once listening, then serves until stdin closes (the fixture's exit) or it is killed.
"""

from __future__ import annotations

import logging
import sys

from s3_helpers import atomic_conditional_puts


def main() -> None:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    atomic_conditional_puts()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _host, port = server.get_host_and_port()
    print(port, flush=True)
    sys.stdin.read()  # returns when the parent closes our stdin or exits
    server.stop()


if __name__ == "__main__":
    main()
