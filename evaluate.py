"""``python evaluate.py ...`` in a checkout: the same entry as ``python -m litseg.evaluate ...`` and the
installed ``litseg-evaluate ...`` command; its usage is in src/litseg/evaluate.py."""

from litseg.evaluate import cli

if __name__ == "__main__":
    cli()
