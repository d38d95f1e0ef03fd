import sys

from clavain.cli import main

sys.exit(main())
