"""The HTTP daemon (Bee's API for chunks, stamps, batches, node state and /rchash) and the ``chunkstore`` command.

cli.py holds every subcommand's arguments and entry point; server.py runs
the daemon, app.py builds the aiohttp application, routes_*.py answer the
endpoints. The top layer: may import everything in chunkstore and sampler.
"""
