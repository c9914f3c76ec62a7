"""docs/python_api.md is what `python -m braid.apidoc` generates from the
docstrings, so the reference cannot go stale; the stubs exist beside the
extension."""
from pathlib import Path

import braid
from braid import apidoc
from conftest import SOURCE


def test_api_reference_is_current():
    committed = (SOURCE / "docs/python_api.md").read_text()
    assert committed == apidoc.reference(), "regenerate: python -m braid.apidoc > docs/python_api.md"


def test_stubs_are_built():
    stubs = Path(braid._braid.__file__).parent / "_braid"
    names = {p.name for p in stubs.glob("*.pyi")}
    assert {"__init__.pyi", "nn.pyi", "optim.pyi", "data.pyi", "comm.pyi", "trainer.pyi"} <= names
    text = (stubs / "__init__.pyi").read_text()
    assert "class Tensor" in text and "def from_dlpack(" in text and "A DLPack capsule" in text
