"""A recipe that exits instead of returning a config."""

import sys


def exits():
    sys.exit(3)  # EXITS_HERE


def exits_with_message():
    sys.exit("no GPU here")
