"""Slow, readable twins of the fast algorithms: test oracles and teaching material."""
