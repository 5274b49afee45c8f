"""Scraping a real process's /metrics over HTTP, parsed with prometheus_client.parser.

scraped = await scrape(port)                 # Scrape: every sample of the text format
scraped.value("kafka_server_brokertopicmetrics_bytesin_total", topic="t")
scraped.get(...)                             # None when the sample is absent
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

import trio
from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Scrape:
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float]
    text: str

    def get(self, name: str, **labels: str) -> float | None:
        return self.samples.get((name, frozenset(labels.items())))

    def value(self, name: str, **labels: str) -> float:
        got = self.get(name, **labels)
        assert got is not None, f"no sample {name}{labels or ''} in:\n{self.text[:3000]}"
        return got


def scrape_blocking(port: int, host: str = "127.0.0.1") -> Scrape:
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as response:
        assert response.status == 200
        text = response.read().decode()
    samples = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    return Scrape(samples, text)


async def scrape(port: int, host: str = "127.0.0.1") -> Scrape:
    return await trio.to_thread.run_sync(scrape_blocking, port, host)
