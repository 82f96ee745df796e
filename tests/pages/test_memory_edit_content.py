"""The edit page refuses a new version that would look blank, and says why."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memories.models import Memory
from tests.base import make_memory


@pytest.mark.django_db
@pytest.mark.parametrize("status", ["active", "proposed"])
@pytest.mark.parametrize("content", ["\u200b\u2060\ufeff", " \U000e0041\U000e0042 "])
def test_it_refuses_an_invisible_new_version(alice_client, alice, status, content):
    memory = make_memory(alice, "Likes tea.", status=status)
    response = alice_client.post(
        reverse("memory-edit", args=[memory.pk]),
        {"content": content, "type": "semantic", "entities": ""},
    )
    assert response.status_code == 200
    assert "visible text" in response.context["form"].errors["content"][0]
    assert b"visible text" in response.content
    memory.refresh_from_db()
    assert memory.status == status
    assert Memory.objects.count() == 1
