"""The config: its schema with typed defaults, the variant argument, checks and user errors."""
