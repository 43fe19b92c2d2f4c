import sys

from ..apps.bench import main

sys.exit(main())
