"""Protocol primitives of Swarm."""
