"""python -m fairq: the same as the fairq command."""

import sys

from .cli import main

sys.exit(main())
