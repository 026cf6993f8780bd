"""``python train.py ...`` in a checkout: the same entry as ``python -m litseg.train ...`` and the
installed ``litseg-train ...`` command; its usage is in src/litseg/train.py."""

from litseg.train import cli

if __name__ == "__main__":
    cli()
