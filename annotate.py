"""``python annotate.py ...`` in a checkout: the same entry as ``python -m litseg.annotate ...`` and the
installed ``litseg-annotate ...`` command; its usage is in src/litseg/annotate.py."""

from litseg.annotate import cli

if __name__ == "__main__":
    cli()
