import sys

from ..apps.video import main

sys.exit(main())
