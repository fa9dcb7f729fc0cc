"""The decisions both stores share, pure: no SQL, no I/O (rules, policy, row judgements)."""
