import sys

from xcep.cli import main

sys.exit(main())
