"""braid.data: datasets (Fashion-MNIST, CSV, libsvm, text, token shards from
``braid tokenize encode``), the batch loader and safetensors files.

    loader = braid.data.Loader(braid.data.TokenDataset("shards/*.bin", context=128),
                               batch_size=16, shuffle=True, seed=1)
    for x, y in loader:        # one epoch; iterate again for the next
        ..."""

from . import _braid

_d = _braid.data

Dataset = _d.Dataset
FashionMnist = _d.FashionMnist
CsvDataset = _d.CsvDataset
LibsvmDataset = _d.LibsvmDataset
CharTextDataset = _d.CharTextDataset
TokenDataset = _d.TokenDataset
Subset = _d.Subset
Loader = _d.Loader
open_dataset = _d.open_dataset
save = _braid.save
load = _braid.load
load_metadata = _braid.load_metadata
