import sys

from clavain.hooks import main

sys.exit(main())
