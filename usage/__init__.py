"""GPU usage: samples scraped from the exporters, per-minute and per-hour rollups, accounting."""
