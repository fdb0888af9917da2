"""``python -m nlu_engine`` runs the command line."""

import sys

from nlu_engine.cli.main import main

sys.exit(main())
