"""Which verifier server gets which request: requests that share a long prefix (the same sample context) go to the
same URL, so that server's prefix cache sees the whole group; the longest blocks go first to the least-loaded URL."""

from __future__ import annotations

import json
from collections.abc import Sequence
from os.path import commonprefix

from .base import Request


def normalize_base_url(url: str) -> str:
    """`host:port`, `http://host:port/` or `.../v1` as `http://host:port` (the form the client appends paths to)."""
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        url = "http://" + url
    return url.removesuffix("/v1")


def prefix_blocks(keys: Sequence[str], order: Sequence[int], min_shared: float = 0.5) -> list[list[int]]:
    """Cut `order` (request indices sorted by `keys`) into blocks of neighbours that share a long prefix: a new block
    starts when the common prefix with the previous request is below `min_shared` of the shorter of the two."""
    blocks: list[list[int]] = []
    for index in order:
        previous, key = keys[blocks[-1][-1]] if blocks else "", keys[index]
        shared = len(commonprefix([previous, key]))
        if shared and shared >= min_shared * min(len(previous), len(key)):
            blocks[-1].append(index)
        else:
            blocks.append([index])
    return blocks


def assign_urls(requests: Sequence[Request], base_urls: Sequence[str]) -> tuple[list[int], list[str]]:
    """Send order (requests sharing a prefix together) and the preferred URL of every request."""
    keys = [json.dumps(r.messages, ensure_ascii=False, sort_keys=True) for r in requests]
    order = sorted(range(len(requests)), key=lambda i: keys[i])
    urls = [base_urls[0]] * len(requests)
    if len(base_urls) > 1:
        blocks = prefix_blocks(keys, order)
        load = {u: 0 for u in base_urls}
        # Longest block first onto the least-loaded server: balanced work, whole prefix groups per server.
        for block in sorted(blocks, key=lambda b: -sum(len(keys[i]) * requests[i].sampling.n for i in b)):
            url = min(base_urls, key=lambda u: load[u])
            for i in block:
                urls[i] = url
                load[url] += len(keys[i]) * requests[i].sampling.n
    return order, urls
