from __future__ import annotations

import pytest

from retrieval.embeddings import (
    EmbeddingDimensionMismatch,
    check_embedding_dimensions,
    column_dimensions,
)

pytestmark = pytest.mark.django_db


def test_it_reads_the_stored_dimension(db):
    assert column_dimensions() == 384


def test_it_accepts_a_matching_model(openai_embeddings):
    check_embedding_dimensions()


def test_it_checks_nothing_without_a_provider(settings, db):
    settings.EMBEDDING_PROVIDER = "none"
    settings.EMBEDDING_DIMENSIONS = 1536
    check_embedding_dimensions()


def test_it_stops_on_a_stored_dimension_the_model_does_not_give(openai_embeddings, settings):
    settings.EMBEDDING_DIMENSIONS = 1536
    with pytest.raises(EmbeddingDimensionMismatch) as caught:
        check_embedding_dimensions()
    message = str(caught.value)
    assert "1536" in message and "384" in message
    assert "python manage.py reembed" in message
    assert "\n" not in message


def test_it_names_the_setting_when_the_local_model_disagrees_with_it(settings, db):
    settings.EMBEDDING_PROVIDER = "local"
    settings.EMBEDDING_MODEL = ""
    settings.EMBEDDING_DIMENSIONS = 768
    with pytest.raises(EmbeddingDimensionMismatch) as caught:
        check_embedding_dimensions()
    assert "TIMOTHY_EMBEDDING_DIMENSIONS=384" in str(caught.value)
    assert "reembed" in str(caught.value)
