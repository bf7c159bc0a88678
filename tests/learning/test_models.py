"""Model helpers shared by the protocols."""

from abm.learning.models import build_model, one_architecture


def test_one_architecture_compares_the_names_and_shapes_of_the_float_state():
    """Two models of the same spec share one architecture whatever their weights; another width,
    or BatchNorm's statistics missing, makes another; any iterable is taken, an empty one agrees."""
    a, b = (build_model("mlp", (4,), 3, hidden=[8]) for _ in range(2))
    assert one_architecture(m for m in (a, b)) and one_architecture([a]) and one_architecture([])
    assert not one_architecture([a, b, build_model("mlp", (4,), 3, hidden=[16])])
    assert not one_architecture([a, build_model("mlp", (4,), 3, hidden=[8], batchnorm=False)])
