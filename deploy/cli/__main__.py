"""`python -m deploy.cli ...` is `trioka ...`."""

from deploy.cli.main import main

main()
