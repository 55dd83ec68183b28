"""Allow `python -m crustacean`."""

from crustacean.cli.entry import main

main()
