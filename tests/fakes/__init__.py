"""Loopback fakes of the servers myclaw talks to (Telegram Bot API, Feishu
Open API, an OpenAI-compatible LLM API). They speak the real HTTP protocols
so the real client libraries are exercised; tests, benchmarks and demos use
them. Run one by hand with ``python scripts/fakes.py``."""
