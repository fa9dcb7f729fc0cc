"""The SQLite store: fairq's promises in one SQLite file, with the standard library alone.

The same file names as fairq.stores.postgres where the job is the same
(store, txn, claim, settle, enqueue, reads, schema, inbox, maintenance,
policy_store, failures, schedules); what only SQLite needs is beside them
(group: group commit; turns: fair write turns between processes;
transactions and callbacks: a transaction on fairq's connection or joined to
an application's). fairq.stores.open_store opens it.
"""
