"""myclaw gateway: config, bus, process loop, agent, CLI."""
