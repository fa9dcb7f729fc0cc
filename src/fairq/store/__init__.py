"""The store layer: every SQL statement fairq runs lives in this package.

Above it (fairq.queue, fairq.inbox) nothing knows which database it talks
to; a store for another database would implement the same transactions
(QueueStore.transaction / reading and the QueueTxn verbs).
"""
