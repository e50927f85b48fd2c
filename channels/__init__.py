"""Chat channels (Telegram, Feishu, terminal) that talk to the message bus."""
