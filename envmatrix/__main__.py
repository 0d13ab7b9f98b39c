import sys

from envmatrix.cli import main

sys.exit(main())
