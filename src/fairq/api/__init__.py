"""The Queue facade, grouped by concept."""
