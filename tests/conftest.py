"""What every layer's tests share: the project's own pytest plugin (chunkstore.testing), as users load it."""

pytest_plugins = ["chunkstore.testing"]
