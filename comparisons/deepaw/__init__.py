"""DeePAW: the equivariant ChargE3Net charge-density model in e3nn-jax on synthetic HfO2,
against e3nn on PyTorch with the same weights."""
