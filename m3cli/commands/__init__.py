"""One module per command; each defines ``register(app)`` and imports its stage inside the command."""
