from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "retrieval"
    verbose_name = "Retrieval"

    def ready(self) -> None:
        from memories import signals
        from retrieval import checks  # noqa: F401  (registers the index check)
        from retrieval.entities import entities_for, forget_redacted_names

        # The store finds a new memory's entities and forgets a redacted
        # memory's names through these, without importing retrieval.
        signals.set_index_hooks(entities=entities_for, forget=forget_redacted_names)
