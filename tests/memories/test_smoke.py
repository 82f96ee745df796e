import pytest

from memories.models import IllegalTransition, Memory


@pytest.mark.django_db
def test_it_proposes_and_confirms(alice):
    memory = Memory.propose(alice, "Alice is vegetarian.", Memory.Type.PREFERENCE)
    assert memory.status == Memory.Status.PROPOSED
    memory.confirm(actor=alice)
    assert memory.status == Memory.Status.ACTIVE
    assert memory.last_confirmed_at is not None
    with pytest.raises(IllegalTransition):
        memory.reject()
