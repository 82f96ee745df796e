"""Signals other parts of the service listen to.

``memory_written`` fires after the transaction that wrote a new memory row
commits; the embedding task listens to it, so a write never waits on a model.
"""

from django.dispatch import Signal

memory_written = Signal()  # kwargs: memory_id
