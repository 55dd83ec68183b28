"""Allow `python -m crustacean`."""

from crustacean.cli.app import main

main()
